#include "qpolicy/io/quantize_tensor.hpp"

#include <algorithm>
#include <cstring>

#include "qpolicy/config/config.hpp"
#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/dispatch/dispatch.hpp"
#include "qpolicy/io/safetensors.hpp"
#include "qpolicy/kernels/cpu/dequantize.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"
#include "qpolicy/kernels/cuda/device_memory.hpp"
#include "qpolicy/kernels/cuda/block_quantizer.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"

namespace qpolicy {

namespace {

/// The bytes of a stored part of `shape`: float32 scales take 4 a value, codes and byte scales 1.
std::size_t stored_bytes(const stored_part& p) {
  return static_cast<std::size_t>(checked::elements(p.shape).value_or(0)) * (p.type == dtype::f32 ? 4 : 1);
}

/// " (tensor 'name')" for messages, or nothing.
std::string tensor_where(const tensor_quant_options& o) {
  return o.name.empty() ? std::string() : " (tensor " + text::py_repr(o.name) + ")";
}

/// The element count of x; an overflowing or empty shape is an error.
std::int64_t checked_elements(const input_view& x, const std::string& where) {
  const std::int64_t shape[] = {x.rows, x.cols};
  const auto elements = checked::elements(shape);
  if (!elements) throw config_error("", "shape " + checked::shape_text(shape) + where + " overflows a 64-bit element count");
  if (*elements == 0)
    throw config_error("", "shape " + checked::shape_text(shape) + where + " has no elements; there is nothing to quantize");
  return *elements;
}

/// What formula `f` cannot take from x and the options: refused with a sentence, before any work.
void check_formula(const schemes::formula_row& f, const input_view& x, const tensor_quant_options& o) {
  const std::string where = tensor_where(o);
  const std::string name(f.name);
  checked_elements(x, where);
  // vLLM checks the Hadamard size before the formula's block (InputHadamardLinearMethod wraps it).
  if (o.transform_size) {
    if (f.transform == schemes::pre_transform::none)
      throw config_error("", "a Hadamard size applies to the rotating formulas; " + name + " rotates nothing" + where);
    if (o.transform_size < 1 || (o.transform_size & (o.transform_size - 1)) != 0)
      throw config_error("", hadamard_not_power_of_two_message(text::to_decimal(o.transform_size)) + where);
    if (x.cols % o.transform_size != 0) throw config_error("", schemes::hadamard_size_message(x.cols, o.transform_size) + where);
  }
  // With a size of its own, a rotating formula's blocks are its base's (the row's message names size 32).
  const auto& blocks = o.transform_size ? schemes::formula_of(f.base) : f;
  if (!schemes::takes_shape(blocks, x.rows, x.cols)) throw config_error("", schemes::block_message(blocks, x.cols, x.rows) + where);
  if (f.model_dtype_only && x.type == element::f32)
    throw config_error("", name + " computes in the model's dtype (low-precision-numerics.md " + std::string(f.section) +
                               ") and takes bf16 or fp16 tensors, not F32" + where);
  if (f.options == schemes::scale_options::fp8) {
    if (o.swizzled)
      throw config_error("", "--scale-layout swizzled is the 128x4 layout of the low-precision keys' block scales (" +
                                 schemes::formula_names(true, true) + "); " + name + " stores float32 scales");
  } else {
    if (o.ue8m0)
      throw config_error("", "--ue8m0 rounds FP8 group and block scales; " + name + "'s scales have their own encoding (" +
                                 std::string(f.section) + ")");
    if (o.layout != fp8::scale_layout::row_major)
      throw config_error("", "--scale-layout col and col-tma are for 1x128 activation groups; " + name + " stores its scales row or swizzled");
    if (o.swizzled && f.tiled())
      throw config_error("", "--scale-layout swizzled is the 128x4 layout of per-row block scales; " + name +
                                 " has one scale per 8x64 tile, stored [N/8, K/64]");
    if (o.swizzled && f.options == schemes::scale_options::row_floats)
      throw config_error("", "--scale-layout swizzled is the 128x4 layout of block scales; " + name + " has one float32 scale per row");
  }
  if (o.amax && !f.takes_amax) throw config_error("", "a given amax sets a per-tensor scale; " + name + " has none" + where);
  if (o.amax && o.device == device_kind::cuda && !f.low_precision())
    throw config_error("", "a given amax is a CPU option of " + name + where);
}

/// The stored type of a formula's codes and of its first-level scales.
dtype code_type(const schemes::formula_row& f) {
  if (f.codes == schemes::code_format::e4m3) return dtype::f8e4m3fn;
  return f.codes == schemes::code_format::int8 ? dtype::i8 : dtype::u8;
}
dtype scale_type(const schemes::formula_row& f) {
  if (f.scales == schemes::scale_format::f32) return dtype::f32;
  return f.scales == schemes::scale_format::e4m3 ? dtype::f8e4m3fn : dtype::u8;
}

/// The stored shape of formula f's first-level scales for [m, k] in the options' layout.
std::vector<std::int64_t> scale_part_shape(const schemes::formula_row& f, std::int64_t m, std::int64_t k, const tensor_quant_options& o) {
  if (f.group == per_tensor) return {1};
  if (f.block()) {
    const auto shape = schemes::block_scale_shape(f, m, k, o.swizzled);
    return {shape[0], shape[1]};
  }
  const auto grid = schemes::scale_grid(f.group, m, k);
  const bool groups = f.group.row == 1 && f.group.col > 0;
  if (groups && o.layout == fp8::scale_layout::column_major) return {grid[1], m};
  if (groups && o.layout == fp8::scale_layout::column_major_tma) return {grid[1], checked::ceil_div(m, 4) * 4};
  return {grid[0], grid[1]};
}

/// What formula f stores for x, after the checks: `parts` get their suffixes, types and shapes, and
/// their bytes sized (reused, not written).
void checked_parts_into(const schemes::formula_row& f, const input_view& x, const tensor_quant_options& o,
                        std::vector<stored_part>& parts, bool allocate = true) {
  check_formula(f, x, o);
  const std::int64_t m = x.rows, k = x.cols;
  parts.resize(f.second == schemes::second_scale::none ? 2 : 3);
  parts[0].suffix.clear();
  parts[0].type = code_type(f);
  if (f.codes == schemes::code_format::lut3_tiles) parts[0].shape = {m / f.tile_rows, k / f.block(), schemes::lut_tile_bytes};
  else parts[0].shape = {m, f.codes == schemes::code_format::e2m1_packed ? k / 2 : k};
  if (allocate) parts[0].bytes.resize(static_cast<std::size_t>(schemes::code_bytes(f, m, k)));
  parts[1].suffix = ".scale";
  parts[1].type = scale_type(f);
  parts[1].shape = scale_part_shape(f, m, k, o);
  if (allocate) parts[1].bytes.resize(stored_bytes(parts[1]));
  if (f.second == schemes::second_scale::codebook) {
    parts[2].suffix = ".codebook";
    parts[2].type = dtype::f8e4m3fn;
    parts[2].shape = {m / f.tile_rows, k / f.block(), schemes::lut_codebook_size};
    if (allocate) parts[2].bytes.resize(static_cast<std::size_t>(schemes::scale_count(f, m, k) * schemes::lut_codebook_size));
  } else if (f.second != schemes::second_scale::none) {
    const bool per_tensor_second = f.second == schemes::second_scale::per_tensor;
    std::string suffix(".");
    suffix.append(f.second_suffix);  // not "." + string: GCC 12 warns about that (a false -Wrestrict)
    parts[2].suffix = std::move(suffix);
    parts[2].type = dtype::f32;
    parts[2].shape = per_tensor_second ? std::vector<std::int64_t>{1} : std::vector<std::int64_t>{m, 1};
    if (allocate) parts[2].bytes.resize(static_cast<std::size_t>(per_tensor_second ? 4 : m * 4));
  }
}
std::vector<stored_part> checked_parts(const schemes::formula_row& f, const input_view& x, const tensor_quant_options& o) {
  std::vector<stored_part> parts;
  checked_parts_into(f, x, o, parts);
  return parts;
}

/// The kernel options of a formula run.
quantize_options kernel_options(const tensor_quant_options& o) {
  return {o.ue8m0, o.layout, o.swizzled, o.amax.has_value(), o.amax.value_or(0.0f), o.transform_size};
}

/// Formula f on the current CUDA device: x and every part's memory are device memory.
void run_on_device(schemes::formula f, const input_view& x, std::vector<device_part>& parts, const tensor_quant_options& o) {
  if (o.swizzled) cuda::fill_zero(parts[1].memory);  // the 128x4 layout's padding stays 0
  cuda::device_memory scratch(sizeof(std::uint32_t));
  const bool codebook = schemes::formula_of(f).second == schemes::second_scale::codebook;
  const quantized_outputs out{parts[0].memory.as<std::uint8_t>(), parts[1].memory.get(),
                              parts.size() > 2 && !codebook ? parts[2].memory.as<float>() : nullptr,
                              codebook ? parts[2].memory.as<std::uint8_t>() : nullptr};
  with_formula(f, [&]<class Formula>(Formula) {
    cuda::quantize<Formula>(x, out, kernel_options(o), scratch.as<std::uint32_t>(), {nullptr, o.name});
  });
  cuda::synchronize();  // the scratch memory lives until the kernels are done
}

/// Device memory for each of the (checked) parts: a build without CUDA refuses here, before any work.
std::vector<device_part> device_parts(const std::vector<stored_part>& parts, const tensor_quant_options& o) {
  cuda::require_cuda("quantize" + (o.name.empty() ? std::string(" a tensor") : " tensor " + text::py_repr(o.name)) + " on the GPU");
  std::vector<device_part> out;
  for (const auto& p : parts) out.push_back({p.suffix, p.type, p.shape, cuda::device_memory(p.bytes.size())});
  return out;
}

}  // namespace

std::string quantize_tensor_keys() { return schemes::formula_names(false) + ", " + schemes::formula_names(true); }

input_view aligned_input(std::span<const std::byte> data, element type, std::int64_t rows, std::int64_t cols,
                         std::vector<std::uint32_t>& scratch) {
  const std::size_t width = type == element::f32 ? 4 : 2;
  if (reinterpret_cast<std::uintptr_t>(data.data()) % width == 0) return {data.data(), type, rows, cols};
  scratch.resize((data.size() + 3) / 4);
  std::memcpy(scratch.data(), data.data(), data.size());
  return {scratch.data(), type, rows, cols};
}

std::vector<stored_part> stored_layout(schemes::formula id, std::int64_t rows, std::int64_t cols, const tensor_quant_options& o) {
  const auto& f = schemes::formula_of(id);
  // A model-dtype input, with no data: only the checks and the parts' shapes are wanted.
  const input_view x{nullptr, element::bf16, rows, cols};
  std::vector<stored_part> parts;
  checked_parts_into(f, x, o, parts, false);
  return parts;
}

std::vector<stored_part> quantize_tensor_parts(schemes::formula id, const input_view& x, const tensor_quant_options& o) {
  std::vector<stored_part> parts;
  quantize_tensor_parts_into(id, x, o, parts);
  return parts;
}

void quantize_tensor_parts_into(schemes::formula id, const input_view& x, const tensor_quant_options& o, std::vector<stored_part>& parts) {
  const auto& f = schemes::formula_of(id);
  checked_parts_into(f, x, o, parts);
  if (o.device == device_kind::cuda) {
    auto on_device = device_parts(parts, o);
    const auto in = cuda::to_device(x.data, static_cast<std::size_t>(x.size()) * (x.type == element::f32 ? 4 : 2));
    run_on_device(id, {in.get(), x.type, x.rows, x.cols}, on_device, o);
    for (std::size_t i = 0; i < parts.size(); ++i) cuda::to_host(on_device[i].memory, parts[i].bytes.data(), parts[i].bytes.size());
    return;
  }
  // The 128x4 layout's padding stays 0 (the kernels write only the scales' slots; the buffers may be reused).
  if (o.swizzled) std::fill(parts[1].bytes.begin(), parts[1].bytes.end(), std::uint8_t{0});
  // Every part's bytes come from operator new: aligned for the float32 scales written into them.
  const bool codebook = f.second == schemes::second_scale::codebook;
  const quantized_outputs out{parts[0].bytes.data(), parts[1].bytes.data(),
                              parts.size() > 2 && !codebook ? reinterpret_cast<float*>(parts[2].bytes.data()) : nullptr,
                              codebook ? parts[2].bytes.data() : nullptr};
  with_formula(id, [&]<class Formula>(Formula) { cpu::quantize<Formula>(x, out, kernel_options(o), {o.threads}); });
}

std::vector<device_part> quantize_tensor_parts_on_device(schemes::formula id, const input_view& x, const tensor_quant_options& o) {
  auto out = device_parts(checked_parts(schemes::formula_of(id), x, o), o);
  run_on_device(id, x, out, o);
  return out;
}

void dequantize_parts(schemes::formula id, std::span<const std::span<const std::byte>> parts, std::int64_t rows, std::int64_t cols,
                      element out_type, void* out, const tensor_quant_options& o) {
  const auto& f = schemes::formula_of(id);
  const auto layout = stored_layout(id, rows, cols, o);
  if (parts.size() != layout.size())
    throw config_error("", std::string(f.name) + " stores " + std::to_string(layout.size()) + " tensors; got " + std::to_string(parts.size()));
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const auto want = stored_bytes(layout[p]);
    if (parts[p].size() != want)
      throw config_error("", std::string(f.name) + "'s " + (layout[p].suffix.empty() ? std::string("codes") : layout[p].suffix.substr(1)) +
                                 " for a " + checked::shape_text(std::vector{rows, cols}) + " tensor are " +
                                 std::string(safetensors::to_string(safetensors::stored_type(layout[p].type))) + " " +
                                 checked::shape_text(layout[p].shape) + " (" + std::to_string(want) + " bytes); got " +
                                 std::to_string(parts[p].size()) + " bytes");
  }
  const std::size_t out_bytes = static_cast<std::size_t>(rows * cols) * (out_type == element::f32 ? 4 : 2);
  const bool codebook = f.second == schemes::second_scale::codebook;
  auto stored_of = [&](const std::vector<const void*>& p) {
    return stored_tensors{static_cast<const std::uint8_t*>(p[0]), p[1], p.size() > 2 && !codebook ? static_cast<const float*>(p[2]) : nullptr,
                          codebook ? static_cast<const std::uint8_t*>(p[2]) : nullptr, rows, cols, o.swizzled};
  };
  if (o.device == device_kind::cuda) {
    std::vector<cuda::device_memory> on_device;
    std::vector<const void*> pointers;
    for (const auto& p : parts) pointers.push_back(on_device.emplace_back(cuda::to_device(p.data(), p.size())).get());
    cuda::device_memory decoded(out_bytes);
    cuda::dequantize(id, stored_of(pointers), out_type, decoded.get(), {.layer = o.name});
    cuda::to_host(decoded, out, out_bytes);
    return;
  }
  // safetensors promises no alignment: the float32 parts are copied to aligned memory first.
  std::vector<std::vector<float>> aligned;
  std::vector<const void*> pointers;
  for (std::size_t p = 0; p < parts.size(); ++p) {
    if (layout[p].type != dtype::f32) {
      pointers.push_back(parts[p].data());
      continue;
    }
    auto& a = aligned.emplace_back(parts[p].size() / 4);
    std::memcpy(a.data(), parts[p].data(), parts[p].size());
    pointers.push_back(a.data());
  }
  cpu::dequantize(id, stored_of(pointers), out_type, out, {o.threads});
}

std::vector<std::int64_t> tensor_scale_shape(key_id key, std::int64_t rows, std::int64_t cols) {
  if (key_of(key).scale.group == per_tensor) return {1};
  const auto grid = schemes::scale_grid(key, rows, cols);
  return {grid[0], grid[1]};
}

}  // namespace qpolicy
