#include "qpolicy/io/quantize_tensor.hpp"

#include "../../kernels/cpu/fast.hpp"
#include "../../kernels/cuda/quant.hpp"
#include <cstring>

#include "qpolicy/config/config.hpp"
#include "qpolicy/core/checked.hpp"
#include "qpolicy/static/dispatch.hpp"

namespace qpolicy {

namespace {

using cpu::reference::block_options;
using cpu::reference::group_options;

/// Output sizes of a key's formula for an [M, K] input.
struct plan_shape {
  std::size_t scales = 0;
  std::vector<std::int64_t> scale_shape;
};

[[noreturn]] void no_kernel(key_id key, const std::string& name) {
  throw config_error("", "no kernel for quant key " + key_name(key) + (name.empty() ? "" : " (tensor " + text::py_repr(name) + ")") +
                             " in this build; quantize-tensor implements " + quantize_tensor_keys());
}

}  // namespace

std::string quantize_tensor_keys() {
  return "fp8_per_tensor_static, fp8_per_tensor_dynamic, fp8_per_token, fp8_per_channel_static, fp8_per_block_static, "
         "fp8_per_block_dynamic";
}

fp8::input_view aligned_input(std::span<const std::byte> data, fp8::element type, std::int64_t rows, std::int64_t cols,
                              std::vector<std::uint32_t>& scratch) {
  const std::size_t width = type == fp8::element::f32 ? 4 : 2;
  if (reinterpret_cast<std::uintptr_t>(data.data()) % width == 0) return {data.data(), type, rows, cols};
  scratch.resize((data.size() + 3) / 4);
  std::memcpy(scratch.data(), data.data(), data.size());
  return {scratch.data(), type, rows, cols};
}

quantized_tensor quantize_tensor(key_id key, const fp8::input_view& x, const tensor_quant_options& o) {
  const std::int64_t m = x.rows, k = x.cols;
  const std::string where = o.name.empty() ? std::string() : " (tensor " + text::py_repr(o.name) + ")";
  const std::int64_t shape[] = {m, k};
  const auto elements = checked::elements(shape);
  if (!elements) throw config_error("", "shape " + checked::shape_text(shape) + where + " overflows a 64-bit element count");
  if (*elements == 0)
    throw config_error("", "shape " + checked::shape_text(shape) + where + " has no elements; there is nothing to quantize");
  quantized_tensor out;
  out.codes.resize(static_cast<std::size_t>(*elements));
  const cpu::cpu_options cpu{o.threads};

  // Shapes first: a formula that cannot take the shape is an error before any work.
  if (key == key_id::fp8_per_block_dynamic && k % 128 != 0)
    throw config_error("", "1x128 groups need K to be a multiple of 128, got K = " + std::to_string(k) + where);
  const std::int64_t groups = k / 128;
  switch (key) {
    case key_id::fp8_per_tensor_static:
    case key_id::fp8_per_tensor_dynamic: out.scale_shape = {1}; break;
    case key_id::fp8_per_token:
    case key_id::fp8_per_channel_static: out.scale_shape = {m, 1}; break;
    case key_id::fp8_per_block_static: out.scale_shape = {checked::ceil_div(m, 128), checked::ceil_div(k, 128)}; break;
    case key_id::fp8_per_block_dynamic:
      if (o.layout == fp8::scale_layout::row_major) out.scale_shape = {m, groups};
      else if (o.layout == fp8::scale_layout::column_major) out.scale_shape = {groups, m};
      else out.scale_shape = {groups, checked::ceil_div(m, 4) * 4};
      break;
    default: no_kernel(key, o.name);
  }
  out.scales.resize(static_cast<std::size_t>(checked::elements(out.scale_shape).value_or(0)));
  const block_options bo{o.ue8m0, false};
  const group_options go{128, o.ue8m0, o.layout};

  if (o.device == device_kind::cpu) {
    with_key(key, [&]<class Key>(Key) {
      if constexpr (std::is_same_v<Key, fp8_per_tensor_static>) cpu::weight_kernel<fp8_per_tensor>::run(x, out.codes.data(), out.scales.data(), cpu);
      else if constexpr (std::is_same_v<Key, fp8_per_channel_static>) cpu::weight_kernel<fp8_per_channel>::run(x, out.codes.data(), out.scales.data(), cpu);
      else if constexpr (std::is_same_v<Key, fp8_per_block_static>) cpu::weight_kernel<fp8_per_block>::run(x, bo, out.codes.data(), out.scales.data(), cpu);
      else if constexpr (std::is_same_v<Key, fp8_per_token> || std::is_same_v<Key, fp8_per_tensor_dynamic>)
        cpu::activation_kernel<Key>::run(x, out.codes.data(), out.scales.data(), cpu);
      else if constexpr (std::is_same_v<Key, fp8_per_block_dynamic>)
        cpu::activation_kernel<Key>::run(x, go, out.codes.data(), out.scales.data(), cpu);
      else no_kernel(key, o.name);
    });
    return out;
  }

  with_key(key, [&]<class Key>(Key) {
    if constexpr (std::is_same_v<Key, fp8_per_tensor_static> || std::is_same_v<Key, fp8_per_tensor_dynamic> ||
                  std::is_same_v<Key, fp8_per_token> || std::is_same_v<Key, fp8_per_channel_static> ||
                  std::is_same_v<Key, fp8_per_block_static> || std::is_same_v<Key, fp8_per_block_dynamic>)
      cuda::quantize_host_tensor<Key>(x, bo, go, out.codes.data(), out.scales.data(), out.scales.size(),
                                      {nullptr, o.name});
    else no_kernel(key, o.name);
  });
  return out;
}

}  // namespace qpolicy
