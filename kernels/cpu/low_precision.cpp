#include "qpolicy/kernels/cpu/low_precision.hpp"

#include <array>
#include <utility>
#include <vector>

#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/kernels/cpu/detail/row_ops.hpp"
#include "qpolicy/schemes/registry.hpp"

namespace qpolicy::cpu {

using schemes::formula;

namespace {

/// One row of formula F: `row` holds its widened values, r its index.
template <formula F>
void quantize_row(const float* row, std::int64_t r, std::int64_t cols, element type, float encode, const lp::outputs& out) {
  constexpr auto& f = schemes::formula_of(F);
  if constexpr (F == formula::int8_per_channel) {
    const float s = lp::int8_scale(type, detail::amax_range(row, cols, true));
    auto* q = reinterpret_cast<std::int8_t*>(out.codes) + r * cols;
    for (std::int64_t k = 0; k < cols; ++k) q[k] = lp::int8_code(type, row[k], s);
    out.row_scales[r] = s;
  } else {
    const std::int64_t blocks = cols / f.block();
    if constexpr (F == formula::nvfp4_per_token) {
      const float st = lp::nvfp4_token_scale(detail::amax_range(row, cols, false));
      encode = 1.0f / st;  // a zero row gives +inf
      out.row_scales[r] = st;
    }
    for (std::int64_t j = 0; j < blocks; ++j) {
      const float* x = row + j * f.block();
      const std::int64_t first = r * cols + j * f.block();
      out.block_scales[lp::block_scale_offset(r, j, blocks, out.swizzled)] = lp::quantize_block<F>(x, encode, out.codes, first);
    }
  }
}

}  // namespace

template <class Formula>
void lp_kernel<Formula>::run(const input_view& x, const lp::outputs& out, const cpu_options& o,
                             std::optional<float> tensor_amax) {
  constexpr formula F = Formula::id;
  float encode = 0.0f;
  if constexpr (F == formula::nvfp4_weight) {
    encode = lp::nvfp4_global_scale(tensor_amax ? *tensor_amax : detail::tensor_amax(x, true, o));  // amaxT of the matrix
    *out.tensor_scale = 1.0f / encode;                                  // weight_scale_2
  }
  detail::parallel_ranges(x.rows, o.threads, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> row(static_cast<std::size_t>(x.cols));
    for (std::int64_t r = first; r < last; ++r) {
      detail::widen(x, r * x.cols, x.cols, row.data());
      quantize_row<F>(row.data(), r, x.cols, x.type, encode, out);
    }
  });
}

// Every low-precision formula of the registry: an external table odr-uses each kernel.
namespace detail {
const void* lp_kernel_table() {
  static const auto table = registry::table_of(
      registry::low_precision_formula_types,
      [](auto tag) { return &lp_kernel<decltype(tag)>::run; });
  return &table;
}
}  // namespace detail

}  // namespace qpolicy::cpu
