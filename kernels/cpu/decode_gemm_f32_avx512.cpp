// The float32 baseline at decode batches on AVX-512 (decode_gemm.hpp): fused multiply-adds of up to 8
// rows of x against pairs of weight rows, the weights prefetched, at the speed their bytes are read.
#include "decode_gemm.hpp"
#include "decode_rows_avx512.hpp"

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>

#include <algorithm>

#include "qpolicy/kernels/cpu/detail/parallel.hpp"

namespace qpolicy::cpu::detail {

// GCC 12's intrinsic headers build some results from an "undefined" register (see e4m3_avx512.hpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

using decode_rows::lanes32;

/// Rows [m0, m0 + MT) of float32 x times NT float32 weight rows, in fused multiply-adds: the float32
/// baseline at decode batches, at the speed its weight bytes are read.
template <int MT, int NT>
QPOLICY_AVX512_BF16 void f32_tile(const float* const (&w)[NT], const float* x, std::int64_t k, std::int64_t n0, std::int64_t m0, float* y,
                                  std::int64_t ldy) {
  __m512 acc[MT][NT];
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NT; ++r) acc[i][r] = _mm512_setzero_ps();
  std::int64_t k0 = 0;
  for (; k0 + 16 <= k; k0 += 16) {
    __m512 wv[NT];
    for (int r = 0; r < NT; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(w[r] + k0) + row_prefetch_bytes, _MM_HINT_T0);
      wv[r] = _mm512_loadu_ps(w[r] + k0);
    }
    for (int i = 0; i < MT; ++i) {
      const __m512 xv = _mm512_loadu_ps(x + (m0 + i) * k + k0);
      for (int r = 0; r < NT; ++r) acc[i][r] = _mm512_fmadd_ps(xv, wv[r], acc[i][r]);
    }
  }
  if (k0 < k) {
    const __mmask16 valid = static_cast<__mmask16>(lanes32(k - k0));
    for (int i = 0; i < MT; ++i) {
      const __m512 xv = _mm512_maskz_loadu_ps(valid, x + (m0 + i) * k + k0);
      for (int r = 0; r < NT; ++r) acc[i][r] = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(valid, w[r] + k0), acc[i][r]);
    }
  }
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NT; ++r) y[(m0 + i) * ldy + n0 + r] = _mm512_reduce_add_ps(acc[i][r]);
}

template <int NT>
QPOLICY_AVX512_BF16 void f32_tile_rows(std::int64_t mt, const float* const (&w)[NT], const float* x, std::int64_t k, std::int64_t n0,
                                       std::int64_t m0, float* y, std::int64_t ldy) {
  switch (mt) {
    case 1: return f32_tile<1, NT>(w, x, k, n0, m0, y, ldy);
    case 2: return f32_tile<2, NT>(w, x, k, n0, m0, y, ldy);
    case 3: return f32_tile<3, NT>(w, x, k, n0, m0, y, ldy);
    case 4: return f32_tile<4, NT>(w, x, k, n0, m0, y, ldy);
    case 5: return f32_tile<5, NT>(w, x, k, n0, m0, y, ldy);
    case 6: return f32_tile<6, NT>(w, x, k, n0, m0, y, ldy);
    case 7: return f32_tile<7, NT>(w, x, k, n0, m0, y, ldy);
    default: return f32_tile<8, NT>(w, x, k, n0, m0, y, ldy);
  }
}

}  // namespace

void decode_gemm_f32_avx512(const f32_weights& w, const float* x, std::int64_t m, float* y, unsigned threads) {
  const std::int64_t n = w.n, k = w.k;
  parallel_ranges((n + 1) / 2, threads, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t p = first; p < last; ++p)
      for (std::int64_t m0 = 0; m0 < m; m0 += 8) {
        const std::int64_t mt = std::min<std::int64_t>(8, m - m0);
        if (2 * p + 1 >= n) {
          const float* const one[1] = {w.values + 2 * p * k};
          f32_tile_rows<1>(mt, one, x, k, 2 * p, m0, y, n);
        } else {
          const float* const two[2] = {w.values + 2 * p * k, w.values + (2 * p + 1) * k};
          f32_tile_rows<2>(mt, two, x, k, 2 * p, m0, y, n);
        }
      }
  });
}

#pragma GCC diagnostic pop

}  // namespace qpolicy::cpu::detail

#endif
