#include "qpolicy/io/quantize_tensor.hpp"

#include "kernels/cpu/vectorized.hpp"
#include "kernels/cuda/quant.hpp"
#include <cstring>

#include "qpolicy/config/config.hpp"
#include "qpolicy/core/checked.hpp"
#include "qpolicy/dispatch/dispatch.hpp"
#include "qpolicy/schemes/kernel_select.hpp"

namespace qpolicy {

namespace {

using cpu::reference::block_options;
using cpu::reference::group_options;

[[noreturn]] void no_kernel(key_id key, const std::string& name) {
  throw config_error("", "no kernel for quant key " + key_name(key) + (name.empty() ? "" : " (tensor " + text::py_repr(name) + ")") +
                             " in this build; quantize-tensor implements " + quantize_tensor_keys());
}

}  // namespace

std::string quantize_tensor_keys() { return schemes::tensor_kernel_keys(); }

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
  if (!schemes::has_tensor_kernel(key)) no_kernel(key, o.name);
  const auto group = key_of(key).scale.group;
  const bool groups = !key_of(key).scale.is_static && group.row == 1 && group.col > 0;  // 1xG activation groups
  if (groups && k % group.col != 0)
    throw config_error("", "1x" + std::to_string(group.col) + " groups need K to be a multiple of " +
                               std::to_string(group.col) + ", got K = " + std::to_string(k) + where);
  out.scale_shape = tensor_scale_shape(key, m, k);
  if (groups && o.layout == fp8::scale_layout::column_major) out.scale_shape = {k / group.col, m};
  if (groups && o.layout == fp8::scale_layout::column_major_tma) out.scale_shape = {k / group.col, checked::ceil_div(m, 4) * 4};
  out.scales.resize(static_cast<std::size_t>(checked::elements(out.scale_shape).value_or(0)));
  const block_options bo{o.ue8m0, false};
  const group_options go{group.col > 0 ? group.col : 128, o.ue8m0, o.layout};

  with_key(key, [&]<class Key>(Key) {
    if constexpr (schemes::has_tensor_kernel(Key::id)) {
      if (o.device == device_kind::cuda) {
        cuda::quantize_host_tensor<Key>(x, bo, go, out.codes.data(), out.scales.data(), out.scales.size(), {nullptr, o.name});
        return;
      }
      cpu::run_key_kernel<Key>(x, {bo, go}, out.codes.data(), out.scales.data(), cpu);
    }
  });
  return out;
}

std::vector<std::int64_t> tensor_scale_shape(key_id key, std::int64_t rows, std::int64_t cols) {
  if (key_of(key).scale.group == per_tensor) return {1};
  const auto grid = schemes::scale_grid(key, rows, cols);
  return {grid[0], grid[1]};
}

}  // namespace qpolicy
