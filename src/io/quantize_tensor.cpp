#include "qpolicy/io/quantize_tensor.hpp"

#include "qpolicy/kernels/cpu/low_precision.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"
#include "qpolicy/kernels/cuda/low_precision.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"
#include <cstring>

#include "qpolicy/config/config.hpp"
#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/dispatch/dispatch.hpp"
#include "qpolicy/schemes/detail/kernel_select.hpp"

namespace qpolicy {

namespace {

using cpu::reference::block_options;
using cpu::reference::group_options;

[[noreturn]] void no_kernel(key_id key, const std::string& name) {
  throw config_error("", "no kernel for quant key " + key_name(key) + (name.empty() ? "" : " (tensor " + text::py_repr(name) + ")") +
                             " in this build; quantize-tensor implements " + quantize_tensor_keys());
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

}  // namespace

std::string quantize_tensor_keys() { return schemes::tensor_kernel_keys() + ", " + schemes::formula_names(); }

input_view aligned_input(std::span<const std::byte> data, element type, std::int64_t rows, std::int64_t cols,
                              std::vector<std::uint32_t>& scratch) {
  const std::size_t width = type == element::f32 ? 4 : 2;
  if (reinterpret_cast<std::uintptr_t>(data.data()) % width == 0) return {data.data(), type, rows, cols};
  scratch.resize((data.size() + 3) / 4);
  std::memcpy(scratch.data(), data.data(), data.size());
  return {scratch.data(), type, rows, cols};
}

quantized_tensor quantize_tensor(key_id key, const input_view& x, const tensor_quant_options& o) {
  quantized_tensor out;
  quantize_tensor_into(key, x, o, out);
  return out;
}

namespace {

/// What an FP8 key's kernel writes for x: its code count and scale shape, after the checks that refuse
/// a key without a kernel or a shape its formula cannot take (before any work).
struct fp8_outputs {
  std::int64_t codes = 0;
  std::vector<std::int64_t> scale_shape;
  block_options blocks;
  group_options groups;
};
fp8_outputs checked_fp8_outputs(key_id key, const input_view& x, const tensor_quant_options& o) {
  const std::int64_t m = x.rows, k = x.cols;
  const std::string where = tensor_where(o);
  fp8_outputs r;
  r.codes = checked_elements(x, where);
  if (!schemes::has_tensor_kernel(key)) no_kernel(key, o.name);
  if (o.swizzled)
    throw config_error("", "--scale-layout swizzled is the 128x4 layout of the low-precision keys' block scales (" +
                               schemes::formula_names(true) + "); " + key_name(key) + " stores float32 scales");
  const auto group = key_of(key).scale.group;
  const bool groups = !key_of(key).scale.is_static && group.row == 1 && group.col > 0;  // 1xG activation groups
  if (groups && k % group.col != 0)
    throw config_error("", "1x" + std::to_string(group.col) + " groups need K to be a multiple of " +
                               std::to_string(group.col) + ", got K = " + std::to_string(k) + where);
  r.scale_shape = tensor_scale_shape(key, m, k);
  if (groups && o.layout == fp8::scale_layout::column_major) r.scale_shape = {k / group.col, m};
  if (groups && o.layout == fp8::scale_layout::column_major_tma) r.scale_shape = {k / group.col, checked::ceil_div(m, 4) * 4};
  r.blocks = block_options{o.ue8m0, false};
  r.groups = group_options{group.col > 0 ? group.col : 128, o.ue8m0, o.layout};
  return r;
}

}  // namespace

void quantize_tensor_into(key_id key, const input_view& x, const tensor_quant_options& o, quantized_tensor& out) {
  const std::string where = tensor_where(o);
  const cpu::cpu_options cpu{o.threads};
  // Shapes first: a formula that cannot take the shape is an error before any work.
  const auto shapes = checked_fp8_outputs(key, x, o);
  out.codes.resize(static_cast<std::size_t>(shapes.codes));
  out.scale_shape = shapes.scale_shape;
  out.scales.resize(static_cast<std::size_t>(checked::elements(out.scale_shape).value_or(0)));
  const block_options& bo = shapes.blocks;
  const group_options& go = shapes.groups;

  with_key(key, [&]<class Key>(Key) {
    if constexpr (schemes::has_tensor_kernel(Key::id)) {
      if (o.device == device_kind::cuda) {
        if (o.amax) throw config_error("", "a given amax is a CPU option of fp8_per_tensor_static" + where);
        cuda::quantize_host_tensor<Key>(x, bo, go, out.codes.data(), out.scales.data(), out.scales.size(), {nullptr, o.name});
        return;
      }
      if constexpr (Key::id == key_id::fp8_per_tensor_static) {
        if (o.amax) {
          cpu::weight_kernel<fp8_per_tensor>::run_with_amax(x, *o.amax, out.codes.data(), out.scales.data(), cpu);
          return;
        }
      }
      cpu::run_key_kernel<Key>(x, {bo, go}, out.codes.data(), out.scales.data(), cpu);
    }
  });
}

std::vector<std::int64_t> tensor_scale_shape(key_id key, std::int64_t rows, std::int64_t cols) {
  if (key_of(key).scale.group == per_tensor) return {1};
  const auto grid = schemes::scale_grid(key, rows, cols);
  return {grid[0], grid[1]};
}

std::optional<tensor_formula> find_tensor_formula(std::string_view name) {
  if (const auto f = schemes::find_formula(name)) return tensor_formula{*f};
  if (const auto k = find_key(name, key_field::plain)) return tensor_formula{*k};
  return std::nullopt;
}

std::string formula_name(const tensor_formula& f) {
  if (const auto* k = std::get_if<key_id>(&f)) return key_name(*k);
  return std::string(schemes::formula_of(std::get<schemes::lp_formula>(f)).name);
}

namespace {

/// What low-precision formula `id` stores for x (types and shapes, bytes sized but not written), after
/// the checks that refuse what it cannot take (before any work).
std::vector<stored_part> checked_lp_parts(schemes::lp_formula id, const input_view& x, const tensor_quant_options& o) {
  const auto& f = schemes::formula_of(id);
  const std::int64_t m = x.rows, k = x.cols;
  const std::string where = tensor_where(o);
  checked_elements(x, where);
  // What the formula cannot take, before any work.
  if (f.block && k % f.block != 0) throw config_error("", schemes::block_message(f, k) + where);
  if (f.model_dtype_only && x.type == element::f32)
    throw config_error("", std::string(f.name) + " computes in the model's dtype (low-precision-numerics.md " + std::string(f.section) +
                               ") and takes bf16 or fp16 tensors, not F32" + where);
  if (o.ue8m0)
    throw config_error("", "--ue8m0 rounds FP8 group and block scales; " + std::string(f.name) + "'s scales have their own encoding (" +
                               std::string(f.section) + ")");
  if (o.layout != fp8::scale_layout::row_major)
    throw config_error("", "--scale-layout col and col-tma are for 1x128 activation groups; " + std::string(f.name) +
                               " stores its scales row or swizzled");
  if (o.swizzled && !f.block)
    throw config_error("", "--scale-layout swizzled is the 128x4 layout of block scales; " + std::string(f.name) +
                               " has one float32 scale per row");
  if (o.amax && f.second != schemes::second_scale::per_tensor)
    throw config_error("", "a given amax sets a per-tensor scale; " + std::string(f.name) + " has none" + where);

  const auto scale_shape = schemes::block_scale_shape(f, m, k, o.swizzled);
  std::vector<stored_part> parts;
  const dtype code_type = f.codes == schemes::code_format::e4m3   ? dtype::f8e4m3fn
                          : f.codes == schemes::code_format::int8 ? dtype::i8
                                                                  : dtype::u8;
  parts.push_back({"", code_type, {m, f.codes == schemes::code_format::e2m1_packed ? k / 2 : k},
                   std::vector<std::uint8_t>(static_cast<std::size_t>(schemes::code_bytes(f, m, k)))});
  const dtype scale_type = f.scales == schemes::scale_format::e8m0 ? dtype::u8
                           : f.scales == schemes::scale_format::e4m3 ? dtype::f8e4m3fn
                                                                     : dtype::f32;
  const std::size_t scale_bytes = static_cast<std::size_t>(scale_shape[0] * scale_shape[1]) * (scale_type == dtype::f32 ? 4 : 1);
  parts.push_back({".scale", scale_type, {scale_shape[0], scale_shape[1]}, std::vector<std::uint8_t>(scale_bytes)});
  if (f.second != schemes::second_scale::none) {
    const std::vector<std::int64_t> second_shape =
        f.second == schemes::second_scale::per_tensor ? std::vector<std::int64_t>{1} : std::vector<std::int64_t>{m, 1};
    std::string suffix(".");
    suffix.append(f.second_suffix);  // not "." + string: GCC 12 warns about that (a false -Wrestrict)
    parts.push_back({std::move(suffix), dtype::f32, second_shape,
                     std::vector<std::uint8_t>(static_cast<std::size_t>(f.second == schemes::second_scale::per_tensor ? 4 : m * 4))});
  }
  return parts;
}

}  // namespace

std::vector<stored_part> quantize_low_precision(schemes::lp_formula id, const input_view& x, const tensor_quant_options& o) {
  const auto& f = schemes::formula_of(id);
  const std::int64_t m = x.rows;
  auto parts = checked_lp_parts(id, x, o);
  const dtype scale_type = parts[1].type;
  // Float outputs go through aligned float buffers (a byte vector promises no float alignment).
  std::vector<float> row_scales(static_cast<std::size_t>(m)), tensor_scale(1);
  lp::outputs out{parts[0].bytes.data(), scale_type == dtype::f32 ? nullptr : parts[1].bytes.data(), row_scales.data(),
                  tensor_scale.data(), o.swizzled};
  with_formula(id, [&]<class Formula>(Formula) {
    if (o.device == device_kind::cuda) cuda::quantize_host_low_precision<Formula>(x, out, {nullptr, o.name}, o.amax);
    else cpu::lp_kernel<Formula>::run(x, out, {o.threads}, o.amax);
  });
  const auto copy_floats = [](const std::vector<float>& from, stored_part& to) { std::memcpy(to.bytes.data(), from.data(), to.bytes.size()); };
  if (scale_type == dtype::f32) copy_floats(row_scales, parts[1]);
  if (f.second == schemes::second_scale::per_tensor) copy_floats(tensor_scale, parts[2]);
  if (f.second == schemes::second_scale::per_token) copy_floats(row_scales, parts[2]);
  return parts;
}

std::vector<stored_part> quantize_tensor_parts(const tensor_formula& f, const input_view& x, const tensor_quant_options& o) {
  if (const auto* lp = std::get_if<schemes::lp_formula>(&f)) return quantize_low_precision(*lp, x, o);
  const auto key = std::get<key_id>(f);
  auto r = quantize_tensor(key, x, o);
  std::vector<stored_part> parts;
  parts.push_back({"", dtype::f8e4m3fn, {x.rows, x.cols}, std::move(r.codes)});
  std::vector<std::uint8_t> scale_bytes(r.scales.size() * sizeof(float));
  std::memcpy(scale_bytes.data(), r.scales.data(), scale_bytes.size());
  parts.push_back({".scale", dtype::f32, std::move(r.scale_shape), std::move(scale_bytes)});
  return parts;
}

}  // namespace qpolicy

namespace qpolicy {

std::vector<device_part> quantize_tensor_parts_on_device(const tensor_formula& f, const input_view& x, const tensor_quant_options& o) {
  std::vector<device_part> out;
  const cuda::launch_options launch{nullptr, o.name};
  if (const auto* id = std::get_if<schemes::lp_formula>(&f)) {
    const auto& formula = schemes::formula_of(*id);
    for (auto& p : checked_lp_parts(*id, x, o)) out.push_back({p.suffix, p.type, p.shape, cuda::device_memory(p.bytes.size())});
    // The kernel writes float32 scales and per-token second scales as its row scales, a per-tensor
    // second scale as its tensor scale; the others go to spare memory it may write.
    cuda::device_memory scratch(sizeof(std::uint32_t)), spare_rows, spare_tensor;
    float* row_scales = out[1].type == dtype::f32 ? out[1].memory.as<float>() : nullptr;
    float* tensor_scale = nullptr;
    if (formula.second == schemes::second_scale::per_token) row_scales = out[2].memory.as<float>();
    if (formula.second == schemes::second_scale::per_tensor) tensor_scale = out[2].memory.as<float>();
    if (!row_scales) row_scales = (spare_rows = cuda::device_memory(static_cast<std::size_t>(x.rows) * sizeof(float))).as<float>();
    if (!tensor_scale) tensor_scale = (spare_tensor = cuda::device_memory(sizeof(float))).as<float>();
    if (o.swizzled) cuda::fill_zero(out[1].memory);  // the 128x4 layout's padding stays 0
    const lp::outputs device_out{out[0].memory.as<std::uint8_t>(), out[1].type == dtype::f32 ? nullptr : out[1].memory.as<std::uint8_t>(),
                                 row_scales, tensor_scale, o.swizzled};
    with_formula(*id, [&]<class Formula>(Formula) {
      cuda::lp_kernel<Formula>::run(x, device_out, scratch.as<std::uint32_t>(), launch, o.amax);
    });
    cuda::synchronize();  // the spare and scratch memory live until the kernels are done
    return out;
  }
  const auto key = std::get<key_id>(f);
  if (o.amax) throw config_error("", "a given amax is a CPU option of fp8_per_tensor_static" + tensor_where(o));
  const auto shapes = checked_fp8_outputs(key, x, o);
  out.push_back({"", dtype::f8e4m3fn, {x.rows, x.cols}, cuda::device_memory(static_cast<std::size_t>(shapes.codes))});
  const auto scale_count = checked::elements(shapes.scale_shape).value_or(0);
  out.push_back({".scale", dtype::f32, shapes.scale_shape, cuda::device_memory(static_cast<std::size_t>(scale_count) * sizeof(float))});
  with_key(key, [&]<class Key>(Key) {
    cuda::quantize_device_tensor<Key>(x, shapes.blocks, shapes.groups, out[0].memory.as<std::uint8_t>(), out[1].memory.as<float>(), launch);
  });
  return out;
}

}  // namespace qpolicy
