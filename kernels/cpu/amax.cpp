// The abs-max passes of the CPU fast kernels (row_ops.hpp): over widened floats (NaN-propagating or
// NaN-ignoring), over bf16 words from their bits (whole runs, or segments of rows), and over a whole
// tensor split over threads.
#include <algorithm>
#include <cstring>
#include <vector>

#include "low_precision_rows.hpp"
#include "qpolicy/kernels/cpu/detail/e4m3_encoder.hpp"
#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/kernels/cpu/detail/row_ops.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"
#include "qpolicy/numerics/numerics.hpp"
#include "qpolicy/kernels/cpu/detail/isa.hpp"

namespace qpolicy::cpu::detail {

using namespace fp8;

// On the bits: a magnitude's bits order like its value, and NaN bits exceed infinity's, so the max is
// an unsigned integer max over sixteen independent lanes (max is exact and order-free, so lanes change
// no result) with NaNs counted on the side: the loop vectorizes. When NaNs propagate, the rare NaN case
// rescans for the first one, which is what the scalar fold returns.
namespace {

/// The end of an amax: elements [i, n) folded into the lanes' max `a` and NaN flag, then the result
/// (the first NaN's magnitude where NaNs propagate and one was seen).
float finish_amax(const float* v, std::int64_t i, std::int64_t n, std::uint32_t a, bool any_nan, bool propagate_nan) {
  for (; i < n; ++i) {
    const std::uint32_t u = bits_of(v[i]) & 0x7FFFFFFFu;
    const bool nan = u > 0x7F800000u;
    a = (!nan && u > a) ? u : a;
    any_nan |= nan;
  }
  if (propagate_nan && any_nan)
    for (std::int64_t k = 0; k < n; ++k)
      if (v[k] != v[k]) return abs_f32(v[k]);
  return float_of(a);
}

QPOLICY_CPU_CLONES float amax_range_portable(const float* __restrict v, std::int64_t n, bool propagate_nan) {
  constexpr int lanes = 16;
  std::uint32_t acc[lanes] = {}, nans[lanes] = {};
  std::uint32_t bits[lanes];
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    std::memcpy(bits, v + i, sizeof bits);
    for (int j = 0; j < lanes; ++j) {
      const std::uint32_t u = bits[j] & 0x7FFFFFFFu;
      const std::uint32_t nan = u > 0x7F800000u;
      acc[j] = (!nan && u > acc[j]) ? u : acc[j];
      nans[j] |= nan;
    }
  }
  std::uint32_t a = 0, any_nan = 0;
  for (int j = 0; j < lanes; ++j) {
    a = acc[j] > a ? acc[j] : a;
    any_nan |= nans[j];
  }
  return finish_amax(v, i, n, a, any_nan != 0, propagate_nan);
}

#if QPOLICY_X86_KERNELS
// GCC 12's intrinsic headers build some results from an "undefined" register, which the
// uninitialized-use warnings report once inlined here: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// amax_range_portable in AVX-512 registers (GCC 12 keeps that loop's lanes scalar): the same unsigned
/// max over magnitude bits with the NaN lanes masked out and counted, then the same rescan.
__attribute__((target("avx512f"))) float amax_range_avx512(const float* v, std::int64_t n, bool propagate_nan) {
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF), infinity = _mm512_set1_epi32(0x7F800000);
  __m512i acc = _mm512_setzero_si512();
  __mmask16 any = 0;
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_and_si512(_mm512_loadu_si512(v + i), magnitude);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(u, infinity);
    acc = _mm512_mask_max_epu32(acc, static_cast<__mmask16>(~nan), acc, u);
    any = static_cast<__mmask16>(any | nan);
  }
  return finish_amax(v, i, n, _mm512_reduce_max_epu32(acc), any != 0, propagate_nan);
}
#pragma GCC diagnostic pop
#endif

}  // namespace

float amax_range(const float* v, std::int64_t n, bool propagate_nan) {
#if QPOLICY_X86_KERNELS
  if (has_avx512_kernels()) return amax_range_avx512(v, n, propagate_nan);
#endif
  return amax_range_portable(v, n, propagate_nan);
}


namespace {

// The amax of bf16 values on their bits, without widening: a magnitude's 15 bits order like its
// value, so the widest is the largest, and widening it afterwards is exact. NaN bits (above
// infinity's 0x7F80) are reported, for the caller to take the float path that picks the NaN.
QPOLICY_CPU_CLONES std::uint16_t amax_bits_bf16(const std::uint16_t* __restrict v, std::int64_t n, bool* nan) {
  constexpr int lanes = 32;
  std::uint16_t acc[lanes] = {}, nans[lanes] = {};
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (int j = 0; j < lanes; ++j) {
      const std::uint16_t u = v[i + j] & 0x7FFF;
      nans[j] |= u > 0x7F80;
      acc[j] = u > acc[j] ? u : acc[j];
    }
  std::uint16_t a = 0, any = 0;
  for (int j = 0; j < lanes; ++j) {
    a = acc[j] > a ? acc[j] : a;
    any |= nans[j];
  }
  for (; i < n; ++i) {
    const std::uint16_t u = v[i] & 0x7FFF;
    any |= u > 0x7F80;
    a = u > a ? u : a;
  }
  *nan = any != 0;
  return a;
}


// A row's segments (`width` wide: 128x128 blocks' columns, 1xG groups) at once, one call per row, not
// per segment: the amax bits of each segment into acc[j] (with any NaN reported).
QPOLICY_CPU_CLONES void segment_amax_bits_portable(const std::uint16_t* __restrict row, std::int64_t n, std::int64_t width,
                                                   std::uint16_t* __restrict acc, bool* nan) {
  std::uint16_t any = 0;
  for (std::int64_t j = 0; j * width < n; ++j) {
    const std::int64_t c0 = j * width, nc = std::min<std::int64_t>(width, n - c0);
    std::uint16_t a = acc[j];
    for (std::int64_t i = 0; i < nc; ++i) {
      const std::uint16_t u = row[c0 + i] & 0x7FFF;
      any |= u > 0x7F80;
      a = u > a ? u : a;
    }
    acc[j] = a;
  }
  *nan = *nan || any != 0;
}

}  // namespace

// AVX-512 registers where the row kernels run, else the cloned loop row by row.
void segment_amax_bits(const std::uint16_t* words, std::int64_t stride, std::int64_t rows, std::int64_t n, std::int64_t width,
                       std::uint16_t* acc, bool* nan) {
#if QPOLICY_X86_KERNELS
  if (has_avx512_kernels()) {
    rows::segment_amax_bits_avx512(words, stride, rows, n, width, acc, nan);
    return;
  }
#endif
  for (std::int64_t r = 0; r < rows && !*nan; ++r) segment_amax_bits_portable(words + r * stride, n, width, acc, nan);
}

bool amax_bf16(const std::uint16_t* v, std::int64_t n, float* amax) {
  bool nan = false;
  std::uint16_t bits = 0;
#if QPOLICY_X86_KERNELS
  if (has_avx512_kernels()) rows::segment_amax_bits_avx512(v, n, 1, n, n, &bits, &nan);
  else
#endif
    bits = amax_bits_bf16(v, n, &nan);
  *amax = from_bf16(bits);
  return !nan;
}

float tensor_amax(const input_view& x, bool propagate_nan, const cpu_options& o) {
  const unsigned n = detail::thread_count(o.threads, x.rows);
  std::vector<float> partial(n, 0.0f);
  const std::int64_t chunk = (x.rows + n - 1) / n;
  const bool bits = x.type == element::bf16 && reinterpret_cast<std::uintptr_t>(x.data) % 2 == 0;
  detail::parallel_ranges(x.rows, o.threads, [&](std::int64_t first, std::int64_t last) {
    if (bits) {  // NaN-free bf16 (almost every weight): one pass over the bits of the whole range
      float a = 0.0f;
      if (amax_bf16(static_cast<const std::uint16_t*>(x.data) + first * x.cols, (last - first) * x.cols, &a)) {
        partial[static_cast<std::size_t>(chunk ? first / chunk : 0)] = a;
        return;
      }
    }
    std::vector<float> row(static_cast<std::size_t>(x.cols));
    float a = 0.0f;
    for (std::int64_t r = first; r < last; ++r) {
      widen(x, r * x.cols, x.cols, row.data());
      const float ra = amax_range(row.data(), x.cols, propagate_nan);
      a = propagate_nan ? max_nan(a, ra) : max_num(a, ra);
    }
    partial[static_cast<std::size_t>(chunk ? first / chunk : 0)] = a;
  });
  float a = 0.0f;
  for (float p : partial) a = propagate_nan ? max_nan(a, p) : max_num(a, p);
  return a;
}

}  // namespace qpolicy::cpu::detail
