#pragma once
// x / b for sixteen bf16 values x without vdivps, which Intel cores issue once per 10-16 cycles: the FP8
// and INT8 quantizers' whole budget per sixteen elements there. With v = RN(1/b), q = RN(x v) and the
// exact residual r = x - q b (one fused multiply-add), RN(q + r v) is RN(x / b) (Markstein's
// correction). tests/numerics/e4m3_encoder_test.cpp checks that on every pair of significands (bf16's
// 8 bits, float32's 24); scaling x or b by a power of two scales every step exactly while all of them
// stay normal, so that covers every x whose quotient the quantizers can tell from zero when b is in
// [2^-50, 2^60] (quotient_by_reciprocal): there |x / b| >= 2^-19 makes q, v and r normal. Smaller
// quotients come out tiny, which every code rounds to zero, and with x's sign. Internal: include it
// only from x86-64 GCC translation units (QPOLICY_BF16_QUOTIENT says whether it is there).
#include "qpolicy/kernels/cpu/detail/e4m3_avx512.hpp"

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#define QPOLICY_BF16_QUOTIENT 1

namespace qpolicy::cpu::detail {

/// Whether bf16_quotients16 gives x / b bit for bit for every bf16 x.
inline bool quotient_by_reciprocal(float b) { return b >= 0x1p-50f && b <= 0x1p60f; }

/// A divisor and its rounded reciprocal, in every lane.
struct bf16_divisor16 {
  __m512 b, reciprocal;
};

QPOLICY_AVX512_F16C inline bf16_divisor16 divisor16(float b) { return {_mm512_set1_ps(b), _mm512_set1_ps(1.0f / b)}; }

/// RN(x / d.b) for bf16 values x (widened; quotient_by_reciprocal(d.b)) whose quotient is finite,
/// except that a zero quotient's sign may be lost; NaN where x is not finite or x * (1 / d.b)
/// overflows. For callers that take the sign from x and redo a run that met a NaN.
QPOLICY_AVX512_F16C inline __m512 bf16_finite_quotients16(__m512 x, bf16_divisor16 d) {
  const __m512 q = _mm512_mul_ps(x, d.reciprocal);
  return _mm512_fmadd_ps(_mm512_fnmadd_ps(q, d.b, x), d.reciprocal, q);
}

/// RN(x / d.b) for bf16 values x (widened; quotient_by_reciprocal(d.b)).
QPOLICY_AVX512_F16C inline __m512 bf16_quotients16(__m512 x, bf16_divisor16 d) {
  const __m512 q = _mm512_mul_ps(x, d.reciprocal);
  const __m512 corrected = bf16_finite_quotients16(x, d);
  // An infinite q (x infinite or the quotient overflowing) would give inf - inf above; a NaN stays NaN.
  const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_sub_ps(q, q), _mm512_setzero_ps(), _CMP_EQ_OQ);
  const __m512 quotient = _mm512_mask_mov_ps(q, finite, corrected);
  // x's sign: b is positive, and a zero quotient must keep it (r = +0 - 0 loses it).
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(quotient), _mm512_castps_si512(x),
                                                       _mm512_set1_epi32(static_cast<int>(0x80000000u)), 0xD8));
}

}  // namespace qpolicy::cpu::detail
#endif
