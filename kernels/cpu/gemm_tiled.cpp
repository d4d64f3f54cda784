#include "qpolicy/kernels/cpu/detail/gemm_tiled.hpp"

#include <algorithm>
#include "qpolicy/kernels/cpu/detail/isa.hpp"
#include <array>
#include <cstring>
#include <type_traits>
#include <vector>

#include "qpolicy/numerics/numerics.hpp"
#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "decode_gemm.hpp"
#include "qpolicy/kernels/cpu/detail/e4m3_encoder.hpp"

namespace qpolicy::cpu {

namespace {

// 32 columns divide 128: one weight block's scale per panel; 128 deep: one K chunk of the block-scaled GEMM.
using detail::panel_cols;
using detail::panel_depth;
constexpr std::int64_t row_block = 64;
constexpr std::int64_t row_group = 512;  // rows one decoded panel serves (its accumulators: 64 KiB)

/// A decoded into float32, rows split over threads.
detail::scratch_vector<float> decode_all(const std::uint8_t* a, std::int64_t m, std::int64_t k, unsigned threads) {
  detail::scratch_vector<float> out(static_cast<std::size_t>(m * k));
  const auto& table = detail::e4m3_values();
  detail::parallel_ranges(m, threads, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t i = first * k; i < last * k; ++i) out[static_cast<std::size_t>(i)] = table[a[i]];
  });
  return out;
}

/// The work of one (column block, group of up to `row_group` rows) item: each K panel of the block's
/// weights is decoded once (decode_panel), then multiplied by the group's row blocks; fills out[rows of
/// the group, cols of the block]. Per output the products are added in K order.
template <class Weights, class Finish, class ChunkDone>
void gemm_items(std::int64_t m, std::int64_t n, std::int64_t k, unsigned threads, const float* a_f, const Weights& w, Finish&& finish,
                ChunkDone&& chunk_done) {
  const std::int64_t col_blocks = (n + panel_cols - 1) / panel_cols, groups = (m + row_group - 1) / row_group;
  detail::parallel_ranges(col_blocks * groups, threads, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> panel(static_cast<std::size_t>(panel_depth * panel_cols));
    std::vector<float> acc(static_cast<std::size_t>(std::min(row_group, m) * panel_cols));
    for (std::int64_t item = first; item < last; ++item) {
      const std::int64_t n0 = (item / groups) * panel_cols, g0 = (item % groups) * row_group;
      const std::int64_t group_rows = std::min(row_group, m - g0);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t k0 = 0; k0 < k; k0 += panel_depth) {
        const std::int64_t depth = std::min(panel_depth, k - k0);
        detail::decode_panel(w, n0, k0, depth, panel.data());
        for (std::int64_t m0 = g0; m0 < g0 + group_rows; m0 += row_block) {
          const std::int64_t rows = std::min(row_block, g0 + group_rows - m0);
          float* acc_rows = acc.data() + (m0 - g0) * panel_cols;
          if constexpr (std::remove_reference_t<ChunkDone>::per_chunk) {
            float chunk_scale[row_block];
            const float ws = chunk_done.scales(m0, rows, n0, k0 / panel_depth, chunk_scale);
            detail::panel_accumulate(a_f + m0 * k + k0, k, rows, panel.data(), depth, acc_rows, chunk_scale, ws);
          } else {
            detail::panel_accumulate(a_f + m0 * k + k0, k, rows, panel.data(), depth, acc_rows, nullptr, 0.0f);
          }
        }
      }
      for (std::int64_t m0 = g0; m0 < g0 + group_rows; m0 += row_block)
        finish(m0, std::min(row_block, g0 + group_rows - m0), n0, acc.data() + (m0 - g0) * panel_cols);
    }
  });
}

/// A's codes decoded into float32 and bf16 (exact: e4m3 values are normal bf16 numbers), for the
/// decode-batch GEMM.
struct decoded_batch {
  detail::scratch_vector<float> values;
  detail::scratch_vector<std::uint16_t> bf16;
  decoded_batch(const std::uint8_t* a, std::int64_t m, std::int64_t k) : values(static_cast<std::size_t>(m * k)), bf16(values.size()) {
    const auto& table = detail::e4m3_values();
    for (std::size_t i = 0; i < values.size(); ++i) bf16[i] = fp8::to_bf16(values[i] = table[a[i]]);
  }
  detail::batch_activations view(std::int64_t m) const { return {values.data(), bf16.data(), m}; }
};

void add_bias_rows(float* out, std::int64_t m, std::int64_t n, const float* bias) {
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t j = 0; j < n; ++j) out[r * n + j] += bias[j];
}

struct no_chunks {
  static constexpr bool per_chunk = false;
  float scales(std::int64_t, std::int64_t, std::int64_t, std::int64_t, float*) const { return 0.0f; }
};

}  // namespace

void gemm_scaled(const std::uint8_t* a, const float* a_scale, bool a_per_row, const std::uint8_t* w,
                 const float* w_scale, bool w_per_row, std::int64_t m, std::int64_t n, std::int64_t k, float* out,
                 const float* bias, const gemm_options& options) {
  if (m <= detail::decode_batch_rows) {
    const decoded_batch x(a, m, k);
    detail::decode_gemm(detail::e4m3_weights{w, n, k}, x.view(m), nullptr, out, options.threads);
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t j = 0; j < n; ++j) {
        float v = out[r * n + j] * a_scale[a_per_row ? r : 0] * w_scale[w_per_row ? j : 0];
        out[r * n + j] = bias ? v + bias[j] : v;
      }
    return;
  }
  const auto a_f = decode_all(a, m, k, options.threads);
  gemm_items(m, n, k, options.threads, a_f.data(), detail::e4m3_weights{w, n, k},
             [&](std::int64_t m0, std::int64_t rows, std::int64_t n0, const float* acc) {
               const std::int64_t cols = std::min(panel_cols, n - n0);
               for (std::int64_t r = 0; r < rows; ++r)
                 for (std::int64_t j = 0; j < cols; ++j) {
                   float v = acc[r * panel_cols + j] * a_scale[a_per_row ? m0 + r : 0] * w_scale[w_per_row ? n0 + j : 0];
                   if (bias) v += bias[n0 + j];
                   out[(m0 + r) * n + n0 + j] = v;
                 }
             },
             no_chunks{});
}

namespace {
struct block_chunks {
  static constexpr bool per_chunk = true;
  const float* a_scale;
  const float* w_scale;
  std::int64_t chunks;
  /// The activation scales of rows [m0, m0 + rows) for chunk kb, and the weight block's scale.
  float scales(std::int64_t m0, std::int64_t rows, std::int64_t n0, std::int64_t kb, float* a_rows) const {
    for (std::int64_t r = 0; r < rows; ++r) a_rows[r] = a_scale[(m0 + r) * chunks + kb];
    return w_scale[(n0 / 128) * chunks + kb];
  }
};
}  // namespace

void gemm_blocked(const std::uint8_t* a, const float* a_scale, const std::uint8_t* w, const float* w_scale,
                  std::int64_t m, std::int64_t n, std::int64_t k, float* out, const float* bias,
                  const gemm_options& options) {
  if (m <= detail::decode_batch_rows) {
    const decoded_batch x(a, m, k);
    const detail::group_scales groups{a_scale, w_scale, k / 128};
    detail::decode_gemm(detail::e4m3_weights{w, n, k}, x.view(m), &groups, out, options.threads);
    if (bias) add_bias_rows(out, m, n, bias);
    return;
  }
  const auto a_f = decode_all(a, m, k, options.threads);
  gemm_items(m, n, k, options.threads, a_f.data(), detail::e4m3_weights{w, n, k},
             [&](std::int64_t m0, std::int64_t rows, std::int64_t n0, const float* acc) {
               const std::int64_t cols = std::min(panel_cols, n - n0);
               for (std::int64_t r = 0; r < rows; ++r)
                 for (std::int64_t j = 0; j < cols; ++j)
                   out[(m0 + r) * n + n0 + j] = bias ? acc[r * panel_cols + j] + bias[n0 + j] : acc[r * panel_cols + j];
             },
             block_chunks{a_scale, w_scale, k / 128});
}

namespace detail {
template <class Weights>
void gemm_panels(const Weights& w, const float* a, std::int64_t m, float* out, unsigned threads) {
  const std::int64_t n = w.matrix->rows, k = w.matrix->cols;
  gemm_items(m, n, k, threads, a, w,
             [&](std::int64_t m0, std::int64_t rows, std::int64_t n0, const float* acc) {
               const std::int64_t cols = std::min(panel_cols, n - n0);
               for (std::int64_t r = 0; r < rows; ++r)
                 for (std::int64_t j = 0; j < cols; ++j) out[(m0 + r) * n + n0 + j] = acc[r * panel_cols + j];
             },
             no_chunks{});
}
const void* gemm_panels_table() {
  return decoded_formula_table([](auto tag) { return &gemm_panels<formula_weights<decltype(tag)::id>>; });
}
}  // namespace detail

void gemm_f32(const float* a, const float* w, std::int64_t m, std::int64_t n, std::int64_t k, float* out,
              const gemm_options& options) {
  if (m <= detail::decode_batch_rows) {
    if constexpr (QPOLICY_X86_KERNELS)
      if (detail::has_bf16_dot_kernels()) return detail::decode_gemm_f32_avx512(detail::f32_weights{w, n, k}, a, m, out, options.threads);
    detail::decode_gemm_rows(detail::code_rows_of(detail::f32_weights{w, n, k}), {a, nullptr, m}, nullptr, out, options.threads);
    return;
  }
  gemm_items(m, n, k, options.threads, a, detail::f32_weights{w, n, k},
             [&](std::int64_t m0, std::int64_t rows, std::int64_t n0, const float* acc) {
               const std::int64_t cols = std::min(panel_cols, n - n0);
               for (std::int64_t r = 0; r < rows; ++r)
                 for (std::int64_t j = 0; j < cols; ++j) out[(m0 + r) * n + n0 + j] = acc[r * panel_cols + j];
             },
             no_chunks{});
}

}  // namespace qpolicy::cpu
