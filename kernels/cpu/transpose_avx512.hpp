#pragma once
// Internal to kernels/cpu: a 16 x 16 transpose of 32-bit lanes in AVX-512 registers, for the kernels that
// turn sixteen rows into sixteen registers of one element each (the blocked GEMM's panels, the rotated
// MXFP4 rows' blocks) with shuffles instead of gathers.
#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>

namespace qpolicy::cpu::detail {

/// Sixteen rows of sixteen 32-bit lanes transposed in registers: r[i] lane j becomes r[j] lane i.
__attribute__((target("avx512f"))) inline void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)
    for (int h = 0; h < 2; ++h) {
      r[i + 2 * h] = _mm512_shuffle_ps(t[i + h], t[i + h + 2], _MM_SHUFFLE(1, 0, 1, 0));
      r[i + 2 * h + 1] = _mm512_shuffle_ps(t[i + h], t[i + h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    }
  for (int i = 0; i < 16; i += 8)
    for (int h = 0; h < 4; ++h) {
      t[i + h] = _mm512_shuffle_f32x4(r[i + h], r[i + h + 4], _MM_SHUFFLE(2, 0, 2, 0));
      t[i + h + 4] = _mm512_shuffle_f32x4(r[i + h], r[i + h + 4], _MM_SHUFFLE(3, 1, 3, 1));
    }
  for (int h = 0; h < 8; ++h) {
    r[h] = _mm512_shuffle_f32x4(t[h], t[h + 8], _MM_SHUFFLE(2, 0, 2, 0));
    r[h + 8] = _mm512_shuffle_f32x4(t[h], t[h + 8], _MM_SHUFFLE(3, 1, 3, 1));
  }
}

}  // namespace qpolicy::cpu::detail

#endif
