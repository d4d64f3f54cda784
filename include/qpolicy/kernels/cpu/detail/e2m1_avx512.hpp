#pragma once
// MXFP4's e2m1 encode of 16 scaled values in one AVX-512 register, shared by the MXFP4 row kernels
// (kernels/cpu/block_quantizer.cpp) and the rotated MXFP4 kernel (kernels/cpu/rotation.cpp). Internal:
// include it only from x86-64 GCC translation units (QPOLICY_E2M1_AVX512 says whether it is there).
#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>
#define QPOLICY_E2M1_AVX512 1

namespace qpolicy::cpu::detail {

/// The e2m1 codes (sign in bit 3, one per 32-bit lane) of 16 scaled values: e2m1_flat's bits, by rounding
/// instead of seven compares. y is first clamped to 6 in magnitude (the largest code; NaN becomes 6 too,
/// code 7, as e2m1_flat gives it). Then |y| + (2^(e + 22) + 6 steps), e the exponent of max(|y|, 1) (0, 1
/// or 2) and a step 2^(e - 1), holds |y| rounded to the e2m1 step of its binade (0.5 below 2, then 1, then
/// 2) with ties to the even multiple, which is the even code: its low bits are k + 6, k the steps. The
/// code is k + 2 e, and the sum's bits shifted down by 22 are 2 (e + 149), so the two added give it in
/// the low 4 bits (k + 6 + 2 e + 298 = code + 304). The same bits as the table form on every float.
__attribute__((target("avx512f"))) inline __m512i e2m1_codes_avx512(__m512 y) {
  const __m512i bits = _mm512_castps_si512(y);
  const __m512 magnitude = _mm512_castsi512_ps(_mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)));
  const __m512 clamped = _mm512_min_ps(magnitude, _mm512_set1_ps(6.0f));  // NaN gives the second operand
  const __m512i binade = _mm512_and_si512(_mm512_castps_si512(_mm512_max_ps(clamped, _mm512_set1_ps(1.0f))),
                                          _mm512_set1_epi32(0x7F800000));
  const __m512 magic = _mm512_castsi512_ps(_mm512_add_epi32(binade, _mm512_set1_epi32((22 << 23) + 6)));
  const __m512i sum = _mm512_castps_si512(_mm512_add_ps(clamped, magic));
  const __m512i code = _mm512_add_epi32(sum, _mm512_srli_epi32(sum, 22));  // the code in bits 0-2, bit 3 clear
  // The low 3 bits of the code, the sign from y's top bits (bits >> 28 has it in bit 3, nothing above).
  return _mm512_ternarylogic_epi32(code, _mm512_srli_epi32(bits, 28), _mm512_set1_epi32(7), 0xE4);
}

/// The scale bytes of 16 MXFP4 blocks and the multipliers their values are scaled by before the encode.
struct mxfp4_scales16 {
  __m512i bytes;
  __m512 multipliers;
};

/// e8m0_reciprocal_bits of 16 scale bytes: 2^(127 - b), the subnormal 2^-127 for b = 254.
__attribute__((target("avx512f"))) inline __m512i e8m0_reciprocal16(__m512i b) {
  const __m512i b254 = _mm512_set1_epi32(254);
  return _mm512_mask_mov_epi32(_mm512_slli_epi32(_mm512_sub_epi32(b254, b), 23), _mm512_cmpeq_epi32_mask(b, b254), _mm512_set1_epi32(0x00400000));
}

/// MXFP4's EVEN scales of 16 blocks from their NaN-free, non-negative amaxes (lp::e8m0_even per lane: the
/// amax rounded to one significand bit, its exponent less 2, within [0, 254]) and their multipliers
/// 2^(127 - (b - 127)), the subnormal 2^-127 for b = 254 (e8m0_reciprocal_bits).
__attribute__((target("avx512f"))) inline mxfp4_scales16 mxfp4_even_scales_of(__m512 amax) {
  const __m512i e = _mm512_srli_epi32(_mm512_add_epi32(_mm512_castps_si512(amax), _mm512_set1_epi32(0x200000)), 23);  // no sign bit
  const __m512i b254 = _mm512_set1_epi32(254);
  const __mmask16 top = _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(255));
  const __m512i b = _mm512_mask_mov_epi32(_mm512_max_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(2)), _mm512_setzero_si512()), top, b254);
  return {b, _mm512_castsi512_ps(e8m0_reciprocal16(b))};
}

/// e8m0_round_up of 16 non-negative, NaN-free lanes: exponent + (mantissa != 0), at most 254; 0 at or
/// below 2^-127.
__attribute__((target("avx512f"))) inline __m512i e8m0_round_up16(__m512 n) {
  const __m512i u = _mm512_castps_si512(n), zero = _mm512_setzero_si512();
  const __m512i exp = _mm512_srli_epi32(u, 23), man = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFF));
  const __m512i b = _mm512_min_epi32(_mm512_mask_add_epi32(exp, _mm512_test_epi32_mask(man, man), exp, _mm512_set1_epi32(1)), _mm512_set1_epi32(254));
  return _mm512_mask_mov_epi32(b, _mm512_cmpeq_epi32_mask(exp, zero) & _mm512_cmple_epu32_mask(man, _mm512_set1_epi32(0x400000)), zero);
}

/// flashinfer_inverse of 16 scale bytes: 0 for b = 0, else (254 - b) << 23 (0.0f for b = 254 too).
__attribute__((target("avx512f"))) inline __m512i flashinfer_inverse16(__m512i b) {
  return _mm512_maskz_slli_epi32(_mm512_test_epi32_mask(b, b), _mm512_sub_epi32(_mm512_set1_epi32(254), b), 23);
}

/// MXFP4's RCEIL scales of 16 blocks from their NaN-free, non-negative amaxes (§4.3: e8m0_round_up of
/// amax * f32(1/6)) and FlashInfer's multipliers.
__attribute__((target("avx512f"))) inline mxfp4_scales16 mxfp4_rceil_scales_of(__m512 amax) {
  const __m512i b = e8m0_round_up16(_mm512_mul_ps(amax, _mm512_castsi512_ps(_mm512_set1_epi32(0x3E2AAAAB))));
  return {b, _mm512_castsi512_ps(flashinfer_inverse16(b))};
}

}  // namespace qpolicy::cpu::detail

#endif
