#pragma once
// MXFP4's e2m1 encode of 16 scaled values in one AVX-512 register, shared by the MXFP4 row kernels
// (kernels/cpu/low_precision.cpp) and the rotated MXFP4 kernel (kernels/cpu/rotation.cpp). Internal:
// include it only from x86-64 GCC translation units (QPOLICY_E2M1_AVX512 says whether it is there).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define QPOLICY_E2M1_AVX512 1

namespace qpolicy::cpu::detail {

/// The e2m1 codes (sign in bit 3, one per 32-bit lane) of 16 scaled values: e2m1_flat's bits, by rounding
/// instead of seven compares. y is first clamped to 6 in magnitude (the largest code; NaN becomes 6 too,
/// code 7, as e2m1_flat gives it). Then |y| + 2^(e + 22), e the exponent of max(|y|, 1) (0, 1 or 2), holds
/// |y| rounded to the e2m1 step of its binade (0.5 below 2, then 1, then 2) with ties to the even
/// multiple, which is the even code: its last bits count the steps k, and k + 4 e + 4 (mod 16) picks the
/// code from a table. Checked against the compares on every float in [0, 8] and a sample of the rest.
__attribute__((target("avx512f"))) inline __m512i e2m1_codes_avx512(__m512 y) {
  const __m512i bits = _mm512_castps_si512(y);
  const __m512 magnitude = _mm512_castsi512_ps(_mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)));
  const __m512 clamped = _mm512_min_ps(magnitude, _mm512_set1_ps(6.0f));  // NaN gives the second operand
  const __m512i binade = _mm512_and_si512(_mm512_castps_si512(_mm512_max_ps(clamped, _mm512_set1_ps(1.0f))),
                                          _mm512_set1_epi32(0x7F800000));
  const __m512 magic = _mm512_castsi512_ps(_mm512_add_epi32(binade, _mm512_set1_epi32(22 << 23)));
  const __m512i sum = _mm512_castps_si512(_mm512_add_ps(clamped, magic));  // exponent e + 149, k in the low bits
  const __m512i index = _mm512_add_epi32(sum, _mm512_srli_epi32(sum, 21));  // k + 4 (e + 149) = k + 4 e + 4 (mod 16)
  // e = 0: k = 0..4 -> 4..8; e = 1: k = 2..4 -> 10..12; e = 2: k = 2, 3 -> 14, 15.
  const __m512i code = _mm512_permutexvar_epi32(index, _mm512_setr_epi32(0, 0, 0, 0, 0, 1, 2, 3, 4, 0, 4, 5, 6, 0, 6, 7));
  return _mm512_or_si512(code, _mm512_and_si512(_mm512_srli_epi32(bits, 28), _mm512_set1_epi32(8)));
}

}  // namespace qpolicy::cpu::detail

#endif
