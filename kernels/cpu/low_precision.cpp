#include "qpolicy/kernels/cpu/low_precision.hpp"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/kernels/cpu/detail/rotation.hpp"
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

/// The 8x64 tiles of rows [8 * first, 8 * last) of x (LUT-B, §B.3), one tile row at a time.
void lut_b_tiles(const input_view& x, std::int64_t first, std::int64_t last, const lp::outputs& out) {
  const std::int64_t k_tiles = x.cols / lp::lut_cols;
  std::vector<float> rows(static_cast<std::size_t>(lp::lut_rows * x.cols));
  lp::lut_scratch scratch;
  float tile[lp::lut_elements];
  for (std::int64_t t = first; t < last; ++t) {
    detail::widen(x, t * lp::lut_rows * x.cols, lp::lut_rows * x.cols, rows.data());
    for (std::int64_t j = 0; j < k_tiles; ++j) {
      for (int r = 0; r < lp::lut_rows; ++r)
        std::copy_n(rows.data() + r * x.cols + j * lp::lut_cols, lp::lut_cols, tile + r * lp::lut_cols);
      const std::int64_t at = t * k_tiles + j;
      out.block_scales[at] = lp::lut_b_tile(tile, scratch, out.codes + at * lp::lut_packed_bytes, out.codebook + at * lp::lut_entries);
    }
  }
}

/// The row-wise formulas: each row widened, rotated first where the row has a transform, then quantized.
template <formula F>
void run_rows(const input_view& x, const lp::outputs& out, const cpu_options& o, float encode) {
  constexpr auto& f = schemes::formula_of(F);
  const std::int64_t size = out.transform_size ? out.transform_size : f.transform_size;
  const detail::hadamard_table rotation(f.transform == schemes::pre_transform::hadamard ? size : 0);
  detail::parallel_ranges(x.rows, o.threads, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> row(static_cast<std::size_t>(x.cols)), rotated(rotation.size ? row.size() : 0);
    for (std::int64_t r = first; r < last; ++r) {
      detail::widen(x, r * x.cols, x.cols, row.data());
      if constexpr (f.transform == schemes::pre_transform::hadamard) {
        detail::rotate_row(row.data(), x.cols, rotation, x.type, rotated.data());
        quantize_row<F>(rotated.data(), r, x.cols, x.type, encode, out);
      } else {
        quantize_row<F>(row.data(), r, x.cols, x.type, encode, out);
      }
    }
  });
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
  if constexpr (F == formula::lut_b) {
    detail::parallel_ranges(x.rows / lp::lut_rows, o.threads, [&](std::int64_t first, std::int64_t last) { lut_b_tiles(x, first, last, out); });
  } else {
    run_rows<F>(x, out, o, encode);
  }
}

void lut_b_dequantize(const std::uint8_t* packed, const std::uint8_t* codebooks, const std::uint8_t* scales, std::int64_t rows,
                      std::int64_t cols, element out_type, std::uint16_t* out, const cpu_options& o) {
  const std::int64_t k_tiles = cols / lp::lut_cols;
  detail::parallel_ranges(rows / lp::lut_rows, o.threads, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t t = first; t < last; ++t)
      for (std::int64_t j = 0; j < k_tiles; ++j) {
        const std::int64_t at = t * k_tiles + j;
        // The tile's eight values, decoded and rounded once, then looked up per index.
        std::uint16_t book[lp::lut_entries];
        for (int e = 0; e < lp::lut_entries; ++e) {
          const float v = fp8::decode(codebooks[at * lp::lut_entries + e]) * lp::e8m0_value(scales[at]);
          book[e] = out_type == element::f16 ? lp::to_fp16(v) : fp8::to_bf16(v);
        }
        const std::uint8_t* p = packed + at * lp::lut_packed_bytes;
        for (int r = 0; r < lp::lut_rows; ++r) {
          std::uint16_t* row = out + (t * lp::lut_rows + r) * cols + j * lp::lut_cols;
          for (int k = 0; k < lp::lut_cols; ++k) row[k] = book[lp::lut_index(p, r * lp::lut_cols + k)];
        }
      }
  });
}

void hadamard_rotate(const input_view& x, std::int64_t size, void* out, const cpu_options& o) {
  std::vector<float> rotated(static_cast<std::size_t>(x.size()));
  detail::rotate_rows(x, size, rotated.data(), o.threads);
  if (x.type == element::f32) {
    std::copy(rotated.begin(), rotated.end(), static_cast<float*>(out));
    return;
  }
  auto* bits = static_cast<std::uint16_t*>(out);
  for (std::size_t i = 0; i < rotated.size(); ++i)  // exact: the values are on the dtype's grid
    bits[i] = x.type == element::f16 ? lp::to_fp16(rotated[i]) : fp8::to_bf16(rotated[i]);
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
