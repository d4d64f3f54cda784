// The decode-batch GEMM in float32 (decode_gemm.hpp): each weight row decoded a chunk at a time by its
// formula's element function, every row of x multiplied with the chunk while it is in L1.
#include "decode_gemm.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "qpolicy/kernels/cpu/detail/e4m3_encoder.hpp"
#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/numerics/detail/low_precision_blocks.hpp"
#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::cpu::detail {

namespace {

constexpr std::int64_t lanes = 16;
constexpr std::int64_t chunk = 128;  // one FP8 weight block's width: a chunk never straddles a group

/// acc[r][j] += sum over t = j (mod 16) of x[r][t] w[t], t in [0, count), for r < rows: the sixteen
/// lanes' float32 sums, each in K order.
QPOLICY_CPU_CLONES void dot_rows(const float* __restrict x, std::int64_t ldx, std::int64_t rows, const float* __restrict w,
                                 std::int64_t count, float* __restrict acc) {
  const std::int64_t whole = count / lanes * lanes;
  for (std::int64_t r = 0; r < rows; ++r) {
    float* __restrict a = acc + r * lanes;
    const float* __restrict xr = x + r * ldx;
    for (std::int64_t t = 0; t < whole; t += lanes)
      for (std::int64_t j = 0; j < lanes; ++j) a[j] += xr[t + j] * w[t + j];
    for (std::int64_t t = whole; t < count; ++t) a[t - whole] += xr[t] * w[t];
  }
}

/// Weight row n's elements [k0, k0 + count) as float32: a pointer into the weights, or into `buffer`.
const float* decode_chunk(const f32_weights& w, std::int64_t n, std::int64_t k0, std::int64_t, float*) {
  return w.values + n * w.k + k0;
}
const float* decode_chunk(const e4m3_weights& w, std::int64_t n, std::int64_t k0, std::int64_t count, float* buffer) {
  const auto& table = e4m3_values();
  const std::uint8_t* codes = w.codes + n * w.k + k0;
  for (std::int64_t t = 0; t < count; ++t) buffer[t] = table[codes[t]];
  return buffer;
}
template <schemes::formula F>
const float* decode_chunk(const formula_weights<F>& w, std::int64_t n, std::int64_t k0, std::int64_t count, float* buffer) {
  const lp_matrix& m = *w.matrix;
  const std::uint8_t* scales = m.block_scales.empty() ? nullptr : m.block_scales.data();
  const std::uint8_t* books = m.codebook.empty() ? nullptr : m.codebook.data();
  for (std::int64_t t = 0; t < count; ++t) buffer[t] = lp::weight_operand<F>(m.codes.data(), scales, m.cols, n, k0 + t, books);
  return buffer;
}

/// Fetches the weight bytes 16 KiB ahead of row n's elements [k0, k0 + count) into the cache (the
/// AVX-512 kernel's distance; formula weights are decoded element by element, slower than memory).
void prefetch_ahead(const f32_weights& w, std::int64_t n, std::int64_t k0, std::int64_t count) {
  const char* p = reinterpret_cast<const char*>(w.values + n * w.k + k0) + 16384;
  for (std::int64_t b = 0; b < count * 4; b += 64) __builtin_prefetch(p + b);
}
void prefetch_ahead(const e4m3_weights& w, std::int64_t n, std::int64_t k0, std::int64_t count) {
  const char* p = reinterpret_cast<const char*>(w.codes + n * w.k + k0) + 16384;
  for (std::int64_t b = 0; b < count; b += 64) __builtin_prefetch(p + b);
}
template <schemes::formula F>
void prefetch_ahead(const formula_weights<F>&, std::int64_t, std::int64_t, std::int64_t) {}

std::int64_t rows_of(const f32_weights& w) { return w.n; }
std::int64_t rows_of(const e4m3_weights& w) { return w.n; }
template <schemes::formula F>
std::int64_t rows_of(const formula_weights<F>& w) { return w.matrix->rows; }
std::int64_t cols_of(const f32_weights& w) { return w.k; }
std::int64_t cols_of(const e4m3_weights& w) { return w.k; }
template <schemes::formula F>
std::int64_t cols_of(const formula_weights<F>& w) { return w.matrix->cols; }

}  // namespace

const std::array<float, 256>& e4m3_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[static_cast<std::size_t>(c)] = fp8::decode(static_cast<std::uint8_t>(c));
    return t;
  }();
  return table;
}

bool exact_bf16(const float* x, std::int64_t count, std::uint16_t* bf16) {
  return has_bf16_dot_kernels() ? exact_bf16_avx512(x, count, bf16) : exact_bf16_scalar(x, count, bf16);
}

bool exact_bf16_scalar(const float* x, std::int64_t count, std::uint16_t* bf16) {
  bool exact = true;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint16_t b = fp8::to_bf16(x[i]);
    bf16[i] = b;
    const float back = fp8::from_bf16(b);
    // At least 2^-60: products with weights of at least 2^-60 are normal floats, which vdpbf16ps does
    // not flush to zero. A NaN compares unequal but stays NaN.
    exact &= (back == x[i] && (back == 0.0f || std::abs(back) >= 0x1p-60f)) || x[i] != x[i];
  }
  return exact;
}

bool has_bf16_dot_kernels() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  static const bool yes = __builtin_cpu_supports("avx512bf16") && has_avx512_kernels();
  return yes;
#else
  return false;
#endif
}

template <class Weights>
void decode_gemm_f32(const Weights& w, const batch_activations& x, const group_scales* groups, float* y, unsigned threads) {
  const std::int64_t n = rows_of(w), k = cols_of(w), m = x.m;
  parallel_ranges(n, threads, [&](std::int64_t first, std::int64_t last) {
    float acc[decode_batch_rows * lanes], part[decode_batch_rows * lanes], buffer[chunk];
    for (std::int64_t row = first; row < last; ++row) {
      for (std::int64_t m0 = 0; m0 < m; m0 += decode_batch_rows) {
        const std::int64_t rows = std::min(decode_batch_rows, m - m0);
        std::fill(acc, acc + rows * lanes, 0.0f);
        for (std::int64_t k0 = 0; k0 < k; k0 += chunk) {
          const std::int64_t count = std::min(chunk, k - k0);
          prefetch_ahead(w, row, k0, count);
          const float* wv = decode_chunk(w, row, k0, count, buffer);
          if (!groups) {
            dot_rows(x.values + m0 * k + k0, k, rows, wv, count, acc);
            continue;
          }
          std::fill(part, part + rows * lanes, 0.0f);
          dot_rows(x.values + m0 * k + k0, k, rows, wv, count, part);
          const float ws = groups->w_scale[(row / 128) * groups->chunks + k0 / chunk];
          for (std::int64_t r = 0; r < rows; ++r) {
            const float s = groups->a_scale[(m0 + r) * groups->chunks + k0 / chunk] * ws;
            for (std::int64_t j = 0; j < lanes; ++j) acc[r * lanes + j] += part[r * lanes + j] * s;
          }
        }
        for (std::int64_t r = 0; r < rows; ++r) {
          float sum = 0.0f;
          for (std::int64_t j = 0; j < lanes; ++j) sum += acc[r * lanes + j];
          y[(m0 + r) * n + row] = sum;
        }
      }
    }
  });
}

template <class Weights>
void decode_panel(const Weights& w, std::int64_t n0, std::int64_t k0, std::int64_t depth, float* panel) {
  if constexpr (has_bf16_words<Weights> && !std::is_same_v<Weights, e4m3_weights>) {
    if (has_bf16_dot_kernels()) return decode_panel_values(w, n0, k0, depth, panel);
  }
  float row[panel_depth];
  for (std::int64_t j = 0; j < panel_cols; ++j) {
    if (n0 + j >= rows_of(w)) {
      for (std::int64_t t = 0; t < depth; ++t) panel[t * panel_cols + j] = 0.0f;
      continue;
    }
    const float* values = decode_chunk(w, n0 + j, k0, depth, row);
    for (std::int64_t t = 0; t < depth; ++t) panel[t * panel_cols + j] = values[t];
  }
}

template void decode_panel(const f32_weights&, std::int64_t, std::int64_t, std::int64_t, float*);
template void decode_panel(const e4m3_weights&, std::int64_t, std::int64_t, std::int64_t, float*);

template void decode_gemm_f32(const f32_weights&, const batch_activations&, const group_scales*, float*, unsigned);
template void decode_gemm_f32(const e4m3_weights&, const batch_activations&, const group_scales*, float*, unsigned);
#define QPOLICY_DECODE_GEMM_F32(F)                                                                                         \
  template void decode_gemm_f32(const formula_weights<F>&, const batch_activations&, const group_scales*, float*, unsigned); \
  template void decode_panel(const formula_weights<F>&, std::int64_t, std::int64_t, std::int64_t, float*);
QPOLICY_FOR_EACH_DECODED_FORMULA(QPOLICY_DECODE_GEMM_F32)
#undef QPOLICY_DECODE_GEMM_F32

}  // namespace qpolicy::cpu::detail
