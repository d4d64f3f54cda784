#pragma once
// The e4m3 encoder's sixteen-lane form (AVX-512), shared by the code runs (kernels/cpu/e4m3_encoder.cpp)
// and the MXFP8 block kernel (kernels/cpu/block_quantizer.cpp). Internal: include it only from x86-64 GCC
// translation units (QPOLICY_AVX512_ENCODER says whether it is there); callers check has_avx512_kernels().
#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>

#include <cstdint>

#define QPOLICY_AVX512_ENCODER 1
#define QPOLICY_AVX512_F16C __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c")))

namespace qpolicy::cpu::detail {

// GCC 12's intrinsic headers build some results from an "undefined" register, which the
// uninitialized-use warnings report once inlined: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

/// The e4m3 rounding of min(|y|, 448), scaled by 2^-8, for sixteen lanes: a float16's value whose
/// bits >> 7 are the code's magnitude. With E the binade of a = min(|y|, 448) (at least 2^-6, e4m3's
/// smallest normal), a + 2^(E+20) lies in the binade of c = 2^(E+20), whose ulp 2^(E-3) is e4m3's step
/// at a: the addition rounds a to e4m3 (ties to even) and subtracting c again is exact. That value
/// times 2^-8 is a float16 exactly (e4m3 spans 2^-9 to 448; float16's subnormal step is 2^-24), whose
/// exponent field lines up with e4m3's (bias 15 against 7, shifted by 8), subnormals with subnormals.
/// All of (448, 464] rounds to 448 and the rest saturates there, hence the cap. `Folded`: y already
/// is 2^-8 times the formula's y (the caller's scale carries the factor exactly), and the bounds are
/// 2^-8 times e4m3's. A NaN lane's value is wrong; callers set its code again.
template <bool Folded>
QPOLICY_AVX512_F16C inline __m512 e4m3_half_values16(__m512 y) {
  const float fold = Folded ? 0x1p-8f : 1.0f;
  const __m512 a = _mm512_range_ps(y, _mm512_set1_ps(448.0f * fold), 0b1010);  // the smaller magnitude, sign cleared
  const __m512 binade = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7F800000)));
  const __m512 c = _mm512_mul_ps(_mm512_max_ps(binade, _mm512_set1_ps(0x1p-6f * fold)), _mm512_set1_ps(0x1p20f));
  const __m512 rounded = _mm512_sub_ps(_mm512_add_ps(a, c), c);
  return Folded ? rounded : _mm512_mul_ps(rounded, _mm512_set1_ps(0x1p-8f));
}

/// Code bytes from float16 words of e4m3_half_values16 (magnitudes) and the lanes' sign mask.
template <class Words, class Bytes, class Mask>
QPOLICY_AVX512_F16C inline Bytes e4m3_code_bytes(Words half, Mask negative);

template <>
QPOLICY_AVX512_F16C inline __m128i e4m3_code_bytes(__m256i half, __mmask16 negative) {
  const __m128i magnitude = _mm256_cvtepi16_epi8(_mm256_srli_epi16(half, 7));
  return _mm_mask_blend_epi8(negative, magnitude, _mm_or_si128(magnitude, _mm_set1_epi8(static_cast<char>(0x80))));
}

template <>
QPOLICY_AVX512_F16C inline __m256i e4m3_code_bytes(__m512i half, __mmask32 negative) {
  const __m256i magnitude = _mm512_cvtepi16_epi8(_mm512_srli_epi16(half, 7));
  return _mm256_mask_blend_epi8(negative, magnitude, _mm256_or_si256(magnitude, _mm256_set1_epi8(static_cast<char>(0x80))));
}

/// The lanes of v whose sign bit is set.
QPOLICY_AVX512_F16C inline __mmask16 sign_lanes16(__m512 v) { return _mm512_movepi32_mask(_mm512_castps_si512(v)); }

/// e4m3 codes of sixteen lanes, saturating round-to-nearest-even (e4m3_half_values16), each byte the
/// magnitude with the sign of `negative`'s lane (codes_of32 says why it may differ from y's). A NaN
/// lane's code is wrong; callers set it again.
template <bool Folded>
QPOLICY_AVX512_F16C inline __m128i codes_of16(__m512 y, __mmask16 negative) {
  return e4m3_code_bytes<__m256i, __m128i, __mmask16>(_mm512_cvtps_ph(e4m3_half_values16<Folded>(y), _MM_FROUND_TO_NEAREST_INT), negative);
}

/// codes_of16 with y's own signs.
template <bool Folded>
QPOLICY_AVX512_F16C inline __m128i codes_of16(__m512 y) {
  return codes_of16<Folded>(y, sign_lanes16(y));
}

/// codes_of16 of y0 and y1 side by side (one shift and one narrowing for both), their signs from
/// `negative` (bit i: lane i of y0, bit 16 + i: lane i of y1), which the caller may take from the
/// values before a division whose zero quotients lose their sign.
template <bool Folded>
QPOLICY_AVX512_F16C inline __m256i codes_of32(__m512 y0, __m512 y1, __mmask32 negative) {
  const __m512i half = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(e4m3_half_values16<Folded>(y0), _MM_FROUND_TO_NEAREST_INT)),
                                          _mm512_cvtps_ph(e4m3_half_values16<Folded>(y1), _MM_FROUND_TO_NEAREST_INT), 1);
  return e4m3_code_bytes<__m512i, __m256i, __mmask32>(half, negative);
}

/// The sign lanes of a and b as one 32-lane mask (a's in the low half).
QPOLICY_AVX512_F16C inline __mmask32 sign_lanes32(__m512 a, __m512 b) {
  return _mm512_kunpackw(static_cast<__mmask32>(sign_lanes16(b)), static_cast<__mmask32>(sign_lanes16(a)));
}

template <bool Bf16>
QPOLICY_AVX512_F16C inline __m512 load16(const void* in, std::int64_t i) {
  if constexpr (Bf16) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const std::uint16_t*>(in) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(w), 16));  // a bf16 is the top half of its float
  } else {
    return _mm512_loadu_ps(static_cast<const float*>(in) + i);
  }
}

#pragma GCC diagnostic pop

}  // namespace qpolicy::cpu::detail
#endif
