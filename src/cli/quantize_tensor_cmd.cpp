// `qpolicy quantize-tensor`: one quant key's formula on every 2-D tensor of a safetensors file.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "cli.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/io/detail/paths.hpp"
#include "qpolicy/io/safetensors.hpp"
#include "qpolicy/io/detail/staged_output.hpp"

namespace qpolicy::cli {

int quantize_tensor(const options& o) {
  const auto& input = o.inputs.front();
  const auto formula = schemes::find_formula(o.key);
  if (!formula)
    throw config_error("--key", fmt::format("unknown quantization name {}; quantize-tensor takes {}", text::py_repr(o.key),
                                            quantize_tensor_keys()));
  const auto start = std::chrono::steady_clock::now();
  check_run_paths({{input, "the input"}}, {{o.output, "-o"}});
  safetensors::file in(input);
  // Which tensors: every 2-D bf16/fp16/fp32 one; the others are reported and left out.
  std::vector<const safetensors::tensor_info*> chosen;
  std::vector<safetensors::tensor_spec> specs;
  for (const auto& t : in.tensors()) {
    const bool floating = t.type == safetensors::dtype::BF16 || t.type == safetensors::dtype::F16 ||
                          t.type == safetensors::dtype::F32;
    if (t.shape.size() != 2 || !floating) {
      fmt::print(stderr, "note: {} ({}, {}-D) is not a 2-D bf16/fp16/fp32 tensor; left out\n", t.name,
                 safetensors::to_string(t.type), t.shape.size());
      continue;
    }
    if (t.elements() == 0) {
      fmt::print(stderr, "note: {} {} has no elements; left out\n", t.name, checked::shape_text(t.shape));
      continue;
    }
    chosen.push_back(&t);
  }
  if (chosen.empty()) throw config_error("", input + ": no 2-D bf16/fp16/fp32 tensor to quantize");
  // Quantize every tensor first (shape errors surface before anything is written), then write.
  std::vector<std::vector<stored_part>> results;
  std::uint64_t bytes_in = 0;
  std::vector<std::uint32_t> scratch;
  for (const auto* t : chosen) {
    const auto type = t->type == safetensors::dtype::BF16 ? element::bf16
                      : t->type == safetensors::dtype::F16 ? element::f16
                                                          : element::f32;
    auto q = o.quant;
    q.name = t->name;
    results.push_back(quantize_tensor_parts(*formula, aligned_input(in.data(*t), type, t->shape[0], t->shape[1], scratch), q));
    for (const auto& part : results.back()) specs.push_back({t->name + part.suffix, safetensors::stored_type(part.type), part.shape});
    bytes_in += t->end - t->begin;
  }
  output_transaction outputs;
  safetensors::writer out(outputs.stage(o.output), specs, {{"qpolicy.quantize_tensor", std::string(schemes::formula_of(*formula).name)}});
  std::uint64_t bytes_out = 0;
  for (const auto& parts : results)
    for (const auto& part : parts) {
      out.write(std::as_bytes(std::span(part.bytes)));
      bytes_out += part.bytes.size();
    }
  out.finish();
  outputs.commit();
  for (const auto& n : outputs.notes()) fmt::print(stderr, "note: {}\n", n);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(stderr, "quantized {} tensors with {}: {:.1f} MB in, {:.1f} MB out, {:.3f} s\n", chosen.size(), schemes::formula_of(*formula).name,
             bytes_in / 1e6, bytes_out / 1e6, secs);
  return 0;
}

}  // namespace qpolicy::cli
