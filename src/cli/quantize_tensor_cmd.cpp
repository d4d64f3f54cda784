// `qpolicy quantize-tensor`: one quant key's formula on every 2-D tensor of a safetensors file.
#include <chrono>
#include <cstdio>
#include <iostream>

#include "cli.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/io/safetensors.hpp"

namespace qpolicy::cli {

namespace {

struct tensor_options {
  std::string key, input, output;
  tensor_quant_options quant;
};

tensor_options parse(const std::vector<std::string>& args) {
  tensor_options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= args.size()) throw usage_error(std::string(name) + " needs a value");
      return args[++i];
    };
    if (a == "--key") o.key = value("--key");
    else if (a == "--ue8m0") o.quant.ue8m0 = true;
    else if (a == "--scale-layout") {
      const auto v = value("--scale-layout");
      if (v == "row") o.quant.layout = fp8::scale_layout::row_major;
      else if (v == "col") o.quant.layout = fp8::scale_layout::column_major;
      else if (v == "col-tma") o.quant.layout = fp8::scale_layout::column_major_tma;
      else throw usage_error("--scale-layout must be row, col or col-tma, got '" + v + "'");
    } else if (a == "--device") {
      const auto v = value("--device");
      if (v == "cpu") o.quant.device = device_kind::cpu;
      else if (v == "cuda") o.quant.device = device_kind::cuda;
      else throw usage_error("--device must be cpu or cuda, got '" + v + "'");
    } else if (a == "--threads") {
      const auto v = value("--threads");
      std::size_t used = 0;
      long n = 0;
      try { n = std::stol(v, &used); } catch (...) { used = 0; }
      if (used != v.size() || n < 1 || n > 4096) throw usage_error("--threads must be an integer from 1 to 4096, got '" + v + "'");
      o.quant.threads = static_cast<unsigned>(n);
    } else if (a == "-o" || a == "--output") o.output = value("-o");
    else if (!a.empty() && a[0] == '-') throw usage_error("unknown option '" + a + "' for quantize-tensor");
    else if (o.input.empty()) o.input = a;
    else throw usage_error("quantize-tensor takes one input file, got '" + o.input + "' and '" + a + "'");
  }
  if (o.key.empty()) throw usage_error("quantize-tensor needs --key KEY");
  if (o.input.empty()) throw usage_error("quantize-tensor needs an INPUT.safetensors");
  if (o.output.empty()) throw usage_error("quantize-tensor needs -o OUTPUT.safetensors");
  return o;
}

}  // namespace

int quantize_tensor(const std::vector<std::string>& args) {
  const auto o = parse(args);
  const auto key = find_key(o.key, key_field::plain);
  if (!key) throw config_error("--key", unknown_quantization_name_message(text::py_repr(o.key)));
  const auto start = std::chrono::steady_clock::now();
  safetensors::file in(o.input);
  // Which tensors: every 2-D bf16/fp16/fp32 one; the others are reported and left out.
  std::vector<const safetensors::tensor_info*> chosen;
  std::vector<safetensors::tensor_spec> specs;
  for (const auto& t : in.tensors()) {
    const bool floating = t.type == safetensors::dtype::BF16 || t.type == safetensors::dtype::F16 ||
                          t.type == safetensors::dtype::F32;
    if (t.shape.size() != 2 || !floating) {
      std::cerr << "note: " << t.name << " (" << safetensors::to_string(t.type) << ", " << t.shape.size()
                << "-D) is not a 2-D bf16/fp16/fp32 tensor; left out\n";
      continue;
    }
    chosen.push_back(&t);
  }
  if (chosen.empty()) throw config_error("", o.input + ": no 2-D bf16/fp16/fp32 tensor to quantize");
  // Quantize every tensor first (shape errors surface before anything is written), then write.
  std::vector<quantized_tensor> results;
  std::uint64_t bytes_in = 0;
  for (const auto* t : chosen) {
    const auto type = t->type == safetensors::dtype::BF16 ? fp8::element::bf16
                      : t->type == safetensors::dtype::F16 ? fp8::element::f16
                                                          : fp8::element::f32;
    auto q = o.quant;
    q.name = t->name;
    results.push_back(quantize_tensor(*key, {in.data(*t).data(), type, t->shape[0], t->shape[1]}, q));
    specs.push_back({t->name, safetensors::dtype::F8_E4M3, t->shape});
    specs.push_back({t->name + ".scale", safetensors::dtype::F32, results.back().scale_shape});
    bytes_in += t->end - t->begin;
  }
  safetensors::writer out(o.output, specs, {{"qpolicy.quantize_tensor", key_name(*key)}});
  std::uint64_t bytes_out = 0;
  for (const auto& r : results) {
    out.write(std::as_bytes(std::span(r.codes)));
    out.write(std::as_bytes(std::span(r.scales)));
    bytes_out += r.codes.size() + r.scales.size() * sizeof(float);
  }
  out.finish();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "quantized %zu tensors with %s: %.1f MB in, %.1f MB out, %.3f s\n", chosen.size(),
               key_name(*key).c_str(), bytes_in / 1e6, bytes_out / 1e6, secs);
  return 0;
}

}  // namespace qpolicy::cli
