#include "qpolicy/kernels/cpu/detail/gemm_tiled.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "qpolicy/numerics/numerics.hpp"
#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "decode_gemm.hpp"

namespace qpolicy::cpu {

namespace {

constexpr std::int64_t panel_cols = 32;   // divides 128: one weight block's scale per panel
constexpr std::int64_t panel_depth = 128;  // one K chunk of the block-scaled GEMM
constexpr std::int64_t row_block = 64;

// acc[r][j] += a[r][t] * panel[t][j] for t in [0, depth): per output the products are added in K
// order, as in the reference (the vector lanes run over j, so nothing is reassociated).
QPOLICY_CPU_CLONES void accumulate_rows(const float* __restrict a, std::int64_t a_stride, std::int64_t rows,
                               const float* __restrict panel, std::int64_t depth, float* __restrict acc) {
  std::int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    float* __restrict c0 = acc + (r + 0) * panel_cols;
    float* __restrict c1 = acc + (r + 1) * panel_cols;
    float* __restrict c2 = acc + (r + 2) * panel_cols;
    float* __restrict c3 = acc + (r + 3) * panel_cols;
    const float* a0 = a + (r + 0) * a_stride;
    const float* a1 = a + (r + 1) * a_stride;
    const float* a2 = a + (r + 2) * a_stride;
    const float* a3 = a + (r + 3) * a_stride;
    for (std::int64_t t = 0; t < depth; ++t) {
      const float* p = panel + t * panel_cols;
      const float x0 = a0[t], x1 = a1[t], x2 = a2[t], x3 = a3[t];
      for (std::int64_t j = 0; j < panel_cols; ++j) {
        c0[j] += x0 * p[j];
        c1[j] += x1 * p[j];
        c2[j] += x2 * p[j];
        c3[j] += x3 * p[j];
      }
    }
  }
  for (; r < rows; ++r) {
    float* __restrict c = acc + r * panel_cols;
    const float* ar = a + r * a_stride;
    for (std::int64_t t = 0; t < depth; ++t) {
      const float* p = panel + t * panel_cols;
      const float x = ar[t];
      for (std::int64_t j = 0; j < panel_cols; ++j) c[j] += x * p[j];
    }
  }
}

/// Decodes W[n0 + j, k0 + t] into panel[t][j] (columns past n are zero).
void decode_panel(const std::uint8_t* w, std::int64_t n, std::int64_t k, std::int64_t n0, std::int64_t k0,
                  std::int64_t depth, float* panel) {
  const auto& table = detail::e4m3_values();
  const std::int64_t cols = std::min(panel_cols, n - n0);
  for (std::int64_t j = 0; j < panel_cols; ++j) {
    if (j >= cols) {
      for (std::int64_t t = 0; t < depth; ++t) panel[t * panel_cols + j] = 0.0f;
      continue;
    }
    const std::uint8_t* row = w + (n0 + j) * k + k0;
    for (std::int64_t t = 0; t < depth; ++t) panel[t * panel_cols + j] = table[row[t]];
  }
}

/// A decoded into float32, rows split over threads.
std::vector<float> decode_all(const std::uint8_t* a, std::int64_t m, std::int64_t k, unsigned threads) {
  std::vector<float> out(static_cast<std::size_t>(m * k));
  const auto& table = detail::e4m3_values();
  detail::parallel_ranges(m, threads, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t i = first * k; i < last * k; ++i) out[static_cast<std::size_t>(i)] = table[a[i]];
  });
  return out;
}

/// The work of one (column block, row block) item: fills out[rows, cols of the block].
template <class Finish, class ChunkDone>
void gemm_items(std::int64_t m, std::int64_t n, std::int64_t k, unsigned threads, const float* a_f,
                const std::uint8_t* w_codes, const float* w_f32, Finish&& finish, ChunkDone&& chunk_done) {
  const std::int64_t col_blocks = (n + panel_cols - 1) / panel_cols, row_blocks = (m + row_block - 1) / row_block;
  detail::parallel_ranges(col_blocks * row_blocks, threads, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> panel(static_cast<std::size_t>(panel_depth * panel_cols));
    std::vector<float> acc(static_cast<std::size_t>(row_block * panel_cols)), part(acc.size());
    for (std::int64_t item = first; item < last; ++item) {
      const std::int64_t n0 = (item / row_blocks) * panel_cols, m0 = (item % row_blocks) * row_block;
      const std::int64_t rows = std::min(row_block, m - m0);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t k0 = 0; k0 < k; k0 += panel_depth) {
        const std::int64_t depth = std::min(panel_depth, k - k0);
        if (w_codes) {
          decode_panel(w_codes, n, k, n0, k0, depth, panel.data());
        } else {
          for (std::int64_t j = 0; j < panel_cols; ++j)
            for (std::int64_t t = 0; t < depth; ++t)
              panel[static_cast<std::size_t>(t * panel_cols + j)] = n0 + j < n ? w_f32[(n0 + j) * k + k0 + t] : 0.0f;
        }
        float* target = chunk_done.per_chunk ? part.data() : acc.data();
        if (chunk_done.per_chunk) std::fill(part.begin(), part.end(), 0.0f);
        accumulate_rows(a_f + m0 * k + k0, k, rows, panel.data(), depth, target);
        if (chunk_done.per_chunk) chunk_done(m0, rows, n0, k0 / panel_depth, part.data(), acc.data());
      }
      finish(m0, rows, n0, acc.data());
    }
  });
}

/// A's codes decoded into float32 and bf16 (exact: e4m3 values are normal bf16 numbers), for the
/// decode-batch GEMM.
struct decoded_batch {
  std::vector<float> values;
  std::vector<std::uint16_t> bf16;
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
  void operator()(std::int64_t, std::int64_t, std::int64_t, std::int64_t, const float*, float*) const {}
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
  gemm_items(m, n, k, options.threads, a_f.data(), w, nullptr,
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
  void operator()(std::int64_t m0, std::int64_t rows, std::int64_t n0, std::int64_t kb, const float* part,
                  float* acc) const {
    const float ws = w_scale[(n0 / 128) * chunks + kb];
    for (std::int64_t r = 0; r < rows; ++r) {
      const float as = a_scale[(m0 + r) * chunks + kb];
      for (std::int64_t j = 0; j < panel_cols; ++j) acc[r * panel_cols + j] += part[r * panel_cols + j] * as * ws;
    }
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
  gemm_items(m, n, k, options.threads, a_f.data(), w, nullptr,
             [&](std::int64_t m0, std::int64_t rows, std::int64_t n0, const float* acc) {
               const std::int64_t cols = std::min(panel_cols, n - n0);
               for (std::int64_t r = 0; r < rows; ++r)
                 for (std::int64_t j = 0; j < cols; ++j)
                   out[(m0 + r) * n + n0 + j] = bias ? acc[r * panel_cols + j] + bias[n0 + j] : acc[r * panel_cols + j];
             },
             block_chunks{a_scale, w_scale, k / 128});
}

void gemm_f32(const float* a, const float* w, std::int64_t m, std::int64_t n, std::int64_t k, float* out,
              const gemm_options& options) {
  if (m <= detail::decode_batch_rows) {
    detail::decode_gemm_f32(detail::f32_weights{w, n, k}, {a, nullptr, m}, nullptr, out, options.threads);
    return;
  }
  gemm_items(m, n, k, options.threads, a, nullptr, w,
             [&](std::int64_t m0, std::int64_t rows, std::int64_t n0, const float* acc) {
               const std::int64_t cols = std::min(panel_cols, n - n0);
               for (std::int64_t r = 0; r < rows; ++r)
                 for (std::int64_t j = 0; j < cols; ++j) out[(m0 + r) * n + n0 + j] = acc[r * panel_cols + j];
             },
             no_chunks{});
}

}  // namespace qpolicy::cpu
