// `qpolicy quantize-tensor`: one quant key's formula on every 2-D tensor of a safetensors file.
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <optional>
#include <cstdio>

#include "cli.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/io/detail/paths.hpp"
#include "qpolicy/io/safetensors.hpp"
#include "qpolicy/io/detail/staged_output.hpp"
#include "qpolicy/kernels/cpu/block_quantizer.hpp"

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
  for (const auto& n : outputs.notes()) inform("note: " + n);
}

/// The codes' tensor of formula f for [rows, cols] (or an [E, ...] stack of a tiled formula), from its
/// stored shape: its rows and columns, or nothing when `t` is no code tensor of f.
std::optional<std::array<std::int64_t, 3>> code_shape(const schemes::formula_row& f, const safetensors::tensor_info& t) {
  using schemes::code_format;
  const auto& s = t.shape;
  switch (f.codes) {
    case code_format::e4m3:
      if (t.type == safetensors::dtype::F8_E4M3 && s.size() == 2) return std::array<std::int64_t, 3>{1, s[0], s[1]};
      break;
    case code_format::e2m1_packed:
      if (t.type == safetensors::dtype::U8 && s.size() == 2) return std::array<std::int64_t, 3>{1, s[0], s[1] * 2};
      break;
    case code_format::int8:
      if (t.type == safetensors::dtype::I8 && s.size() == 2) return std::array<std::int64_t, 3>{1, s[0], s[1]};
      break;
    case code_format::lut3_tiles:
      if (t.type == safetensors::dtype::U8 && (s.size() == 3 || s.size() == 4) && s.back() == schemes::lut_tile_bytes)
        return std::array<std::int64_t, 3>{s.size() == 4 ? s[0] : 1, s[s.size() - 3] * lp::lut_rows, s[s.size() - 2] * lp::lut_cols};
      break;
  }
  return std::nullopt;
}

/// `--dequantize`: every code tensor T of KEY's formula in the input, with the parts quantize-tensor
/// stores beside it (T.scale, and T.scale_2, T.codebook, ...), decoded to T in --dtype. A missing or
/// mis-shaped part is refused, naming it and what was expected, before anything is written.
int dequantize(const options& o, schemes::formula id) {
  const auto& f = schemes::formula_of(id);
  if (o.quant.layout != fp8::scale_layout::row_major)
    throw config_error("--scale-layout", "--dequantize reads row-major float32 scales or the low-precision block scales row or swizzled; "
                                         "--scale-layout col and col-tma are not decoded");
  if (f.codes == schemes::code_format::lut3_tiles && o.dequantize_type == element::f32)
    throw config_error("--dtype", "LUT-B decodes to bf16 or fp16 (new-schemes-numerics.md §B.4), not f32");
  check_run_paths({{o.inputs.front(), "the input"}}, {{o.output, "-o"}});
  safetensors::file in(o.inputs.front());
  auto is_part = [&](const std::string& name) {
    for (std::string_view suffix : {".scale", ".codebook", ".rotated"})
      if (name.ends_with(suffix)) return true;
    // ".<second suffix>", compared in two steps: GCC 12 warns about "." + string (a false -Wrestrict).
    const auto second = f.second_suffix;
    return !second.empty() && name.size() > second.size() && name.ends_with(second) && name[name.size() - second.size() - 1] == '.';
  };
  std::vector<std::pair<safetensors::tensor_spec, std::vector<std::uint8_t>>> results;
  for (const auto& t : in.tensors()) {
    if (is_part(t.name)) continue;
    const auto shape = code_shape(f, t);
    if (!shape) {
      inform(fmt::format("note: {} ({} {}) is not a code tensor of {}; left out", t.name, safetensors::to_string(t.type),
                         checked::shape_text(t.shape), f.name));
      continue;
    }
    const auto [experts, rows, cols] = *shape;
    auto q = o.quant;
    q.name = t.name;
    // What the formula stores beside the codes, from its row: each part must be there as stored.
    const auto parts = stored_layout(id, experts * rows, cols, q);
    std::vector<std::span<const std::byte>> data{in.data(t)};
    for (std::size_t p = 1; p < parts.size(); ++p) {
      auto want = parts[p].shape;
      if (experts > 1) {
        want[0] /= experts;
        want.insert(want.begin(), experts);
      }
      const auto part_name = t.name + parts[p].suffix;
      const auto* part = in.find(part_name);
      const auto type = safetensors::stored_type(parts[p].type);
      if (!part || part->type != type || part->shape != want)
        throw config_error("", fmt::format("{} must be {} {} beside {} {} ({}'s stored tensors){}", part_name, safetensors::to_string(type),
                                           checked::shape_text(want), t.name, checked::shape_text(t.shape), f.name,
                                           part ? fmt::format("; got {} {}", safetensors::to_string(part->type), checked::shape_text(part->shape))
                                                : std::string("; it is missing")));
      data.push_back(in.data(*part));
    }
    std::vector<std::int64_t> out_shape{rows, cols};
    if (experts > 1 || t.shape.size() == 4) out_shape.insert(out_shape.begin(), experts);
    const std::size_t width = o.dequantize_type == element::f32 ? 4 : 2;
    std::vector<std::uint8_t> out(static_cast<std::size_t>(experts * rows * cols) * width);
    dequantize_parts(id, data, experts * rows, cols, o.dequantize_type, out.data(), q);
    const auto out_type = o.dequantize_type == element::f32 ? safetensors::dtype::F32
                          : o.dequantize_type == element::f16 ? safetensors::dtype::F16
                                                              : safetensors::dtype::BF16;
    results.push_back({{t.name, out_type, out_shape}, std::move(out)});
  }
  if (results.empty()) throw config_error("", o.inputs.front() + ": no code tensor of " + std::string(f.name) + " to decode");
  write_output(o, results, std::string(f.name) + " --dequantize");
  inform(fmt::format("decoded {} tensors of {}", results.size(), f.name));
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
  if (o.dequantize) return dequantize(o, *formula);
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
      inform(fmt::format("note: {} ({}, {}-D) is not a {} bf16/fp16/fp32 tensor; left out", t.name, safetensors::to_string(t.type),
                         t.shape.size(), row.tiled() ? "2-D or 3-D" : "2-D"));
      continue;
    }
    if (t.elements() == 0) {
      inform(fmt::format("note: {} {} has no elements; left out", t.name, checked::shape_text(t.shape)));
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
  inform(fmt::format("quantized {} tensors with {}: {:.1f} MB in, {:.1f} MB out, {:.3f} s", chosen.size(), schemes::formula_of(*formula).name,
                     bytes_in / 1e6, bytes_out / 1e6, secs));
  return 0;
}

}  // namespace qpolicy::cli
