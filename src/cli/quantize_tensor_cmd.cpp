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
#include "qpolicy/kernels/cpu/low_precision.hpp"

namespace qpolicy::cli {

namespace {

element element_of(safetensors::dtype t) {
  return t == safetensors::dtype::BF16 ? element::bf16 : t == safetensors::dtype::F16 ? element::f16 : element::f32;
}

/// Writes `tensors` (name, stored type, shape, bytes) to o.output through a staged output.
void write_output(const options& o, const std::vector<std::pair<safetensors::tensor_spec, std::vector<std::uint8_t>>>& tensors,
                  std::string_view what) {
  std::vector<safetensors::tensor_spec> specs;
  for (const auto& t : tensors) specs.push_back(t.first);
  output_transaction outputs;
  safetensors::writer out(outputs.stage(o.output), specs, {{"qpolicy.quantize_tensor", std::string(what)}});
  for (const auto& t : tensors) out.write(std::as_bytes(std::span(t.second)));
  out.finish();
  outputs.commit();
  for (const auto& n : outputs.notes()) fmt::print(stderr, "note: {}\n", n);
}

/// `--dequantize`: the LUT-B tensors T, T.codebook and T.scale of the input decoded to T in --dtype
/// (new-schemes §B.4), [N, K] or [E, N, K]. A missing or mis-shaped part is refused before anything is written.
int dequantize(const options& o, const schemes::formula_row& f) {
  if (f.codes != schemes::code_format::lut3_tiles)
    throw config_error("--dequantize", fmt::format("--dequantize decodes LUT-B tiles (--key lut_b); {} is not decoded by this build",
                                                   f.name));
  check_run_paths({{o.inputs.front(), "the input"}}, {{o.output, "-o"}});
  safetensors::file in(o.inputs.front());
  std::vector<std::pair<safetensors::tensor_spec, std::vector<std::uint8_t>>> results;
  for (const auto& t : in.tensors()) {
    const std::string& name = t.name;
    if (name.ends_with(".codebook") || name.ends_with(".scale")) continue;
    const auto* book = in.find(name + ".codebook");
    const auto* scale = in.find(name + ".scale");
    const auto& s = t.shape;
    const bool packed = t.type == safetensors::dtype::U8 && (s.size() == 3 || s.size() == 4) && s.back() == schemes::lut_tile_bytes;
    if (!packed) {
      fmt::print(stderr, "note: {} is not a LUT-B index tensor (U8 [.., N/8, K/64, 192]); left out\n", name);
      continue;
    }
    std::vector<std::int64_t> grid(s.begin(), s.end() - 1), book_shape = grid;
    book_shape.push_back(schemes::lut_codebook_size);
    if (!book || book->type != safetensors::dtype::F8_E4M3 || book->shape != book_shape)
      throw config_error("", fmt::format("{}.codebook must be F8_E4M3 {} for {} {}", name, checked::shape_text(book_shape), name,
                                         checked::shape_text(s)));
    if (!scale || scale->type != safetensors::dtype::U8 || scale->shape != grid)
      throw config_error("", fmt::format("{}.scale must be U8 {} for {} {}", name, checked::shape_text(grid), name, checked::shape_text(s)));
    const std::int64_t experts = s.size() == 4 ? s[0] : 1, rows = s[s.size() - 3] * lp::lut_rows, cols = s[s.size() - 2] * lp::lut_cols;
    std::vector<std::int64_t> shape{rows, cols};
    if (s.size() == 4) shape.insert(shape.begin(), experts);
    std::vector<std::uint8_t> out(static_cast<std::size_t>(experts * rows * cols * 2));
    const auto codes = in.data(t), books = in.data(*book), scales = in.data(*scale);
    cpu::lut_b_dequantize(reinterpret_cast<const std::uint8_t*>(codes.data()), reinterpret_cast<const std::uint8_t*>(books.data()),
                          reinterpret_cast<const std::uint8_t*>(scales.data()), experts * rows, cols, o.dequantize_type,
                          reinterpret_cast<std::uint16_t*>(out.data()), {o.quant.threads});
    results.push_back({{name, o.dequantize_type == element::f16 ? safetensors::dtype::F16 : safetensors::dtype::BF16, shape}, std::move(out)});
  }
  if (results.empty()) throw config_error("", o.inputs.front() + ": no LUT-B index tensor (U8 [.., N/8, K/64, 192]) to decode");
  write_output(o, results, std::string(f.name) + " --dequantize");
  fmt::print(stderr, "decoded {} tensors of {}\n", results.size(), f.name);
  return 0;
}

}  // namespace

int quantize_tensor(const options& o) {
  const auto& input = o.inputs.front();
  const auto formula = schemes::find_formula(o.key);
  if (!formula)
    throw config_error("--key", fmt::format("unknown quantization name {}; quantize-tensor takes {}", text::py_repr(o.key),
                                            quantize_tensor_keys()));
  const auto& row = schemes::formula_of(*formula);
  if (o.dequantize) return dequantize(o, row);
  if (o.rotated_out && row.transform != schemes::pre_transform::hadamard)
    throw usage_error(fmt::format("--rotated-out stores the Hadamard keys' rotated input; {} does not rotate", row.name));
  const auto start = std::chrono::steady_clock::now();
  check_run_paths({{input, "the input"}}, {{o.output, "-o"}});
  safetensors::file in(input);
  // Which tensors: every 2-D bf16/fp16/fp32 one (and 3-D [E, N, K] expert stacks for a tiled formula,
  // whose tiles never cross experts); the others are reported and left out.
  std::vector<const safetensors::tensor_info*> chosen;
  for (const auto& t : in.tensors()) {
    const bool floating = t.type == safetensors::dtype::BF16 || t.type == safetensors::dtype::F16 ||
                          t.type == safetensors::dtype::F32;
    const bool rank = t.shape.size() == 2 || (t.shape.size() == 3 && row.tiled());
    if (!rank || !floating) {
      fmt::print(stderr, "note: {} ({}, {}-D) is not a {} bf16/fp16/fp32 tensor; left out\n", t.name,
                 safetensors::to_string(t.type), t.shape.size(), row.tiled() ? "2-D or 3-D" : "2-D");
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
  std::vector<std::pair<safetensors::tensor_spec, std::vector<std::uint8_t>>> tensors;
  std::uint64_t bytes_in = 0, bytes_out = 0;
  std::vector<std::uint32_t> scratch;
  for (const auto* t : chosen) {
    const auto type = element_of(t->type);
    auto q = o.quant;
    q.name = t->name;
    const std::int64_t experts = t->shape.size() == 3 ? t->shape[0] : 1, rows = t->shape[t->shape.size() - 2], cols = t->shape.back();
    if (experts > 1 && !schemes::takes_shape(row, rows, cols))  // per expert: the stack's rows would hide a partial tile
      throw config_error("", schemes::block_message(row, cols, rows) + " (tensor " + text::py_repr(t->name) + ")");
    const auto x = aligned_input(in.data(*t), type, experts * rows, cols, scratch);
    for (auto& part : quantize_tensor_parts(*formula, x, q)) {
      if (t->shape.size() == 3) {  // [E * N/8, ...] is [E, N/8, ...]
        part.shape[0] /= experts;
        part.shape.insert(part.shape.begin(), experts);
      }
      bytes_out += part.bytes.size();
      tensors.push_back({{t->name + part.suffix, safetensors::stored_type(part.type), part.shape}, std::move(part.bytes)});
    }
    if (o.rotated_out) {  // the rotation the codes were made from, in the input's dtype (§A.3)
      std::vector<std::uint8_t> rotated(static_cast<std::size_t>(x.size() * (type == element::f32 ? 4 : 2)));
      cpu::hadamard_rotate(x, row.transform_size, rotated.data(), {o.quant.threads});
      bytes_out += rotated.size();
      tensors.push_back({{t->name + ".rotated", t->type, t->shape}, std::move(rotated)});
    }
    bytes_in += t->end - t->begin;
  }
  write_output(o, tensors, row.name);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(stderr, "quantized {} tensors with {}: {:.1f} MB in, {:.1f} MB out, {:.3f} s\n", chosen.size(), schemes::formula_of(*formula).name,
             bytes_in / 1e6, bytes_out / 1e6, secs);
  return 0;
}

}  // namespace qpolicy::cli
