#pragma once
// The e4m3 encoder's sixteen-lane form (AVX-512), shared by the code runs (kernels/cpu/e4m3_encoder.cpp)
// and the MXFP8 block kernel (kernels/cpu/low_precision.cpp). Internal: include it only from x86-64 GCC
// translation units (QPOLICY_AVX512_ENCODER says whether it is there); callers check has_avx512_kernels().
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#include <cstdint>

#define QPOLICY_AVX512_ENCODER 1
#define QPOLICY_AVX512_F16C __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

namespace qpolicy::cpu::detail {

// GCC 12's intrinsic headers build some results from an "undefined" register, which the
// uninitialized-use warnings report once inlined: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

/// e4m3 codes of sixteen lanes, saturating round-to-nearest-even, as signed bytes: the steps of the
/// 256-bit encoder (e4m3_encoder.cpp codes_of: a + 2^(E+20) - 2^(E+20) rounds a to e4m3, times 2^-8 a
/// float16 whose bits >> 7 are the code), vpmovswb saturating as its signed pack does. `Folded`: y is
/// already 2^-8 times the formula's y. A NaN lane's code is wrong; callers set it again.
template <bool Folded>
QPOLICY_AVX512_F16C inline __m128i codes_of16(__m512 y) {
  const float fold = Folded ? 0x1p-8f : 1.0f;
  const __m512 sign_bit = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u)));
  const __m512 sign = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(y), _mm512_castps_si512(sign_bit)));
  const __m512 magnitude = _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_castps_si512(sign_bit), _mm512_castps_si512(y)));
  const __m512 a = _mm512_min_ps(magnitude, _mm512_set1_ps(448.0f * fold));
  const __m512 binade = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7F800000)));
  const __m512 c = _mm512_mul_ps(_mm512_max_ps(binade, _mm512_set1_ps(0x1p-6f * fold)), _mm512_set1_ps(0x1p20f));
  const __m512 rounded = _mm512_sub_ps(_mm512_add_ps(a, c), c);
  const __m512 half_value = Folded ? rounded : _mm512_mul_ps(rounded, _mm512_set1_ps(0x1p-8f));
  const __m256i half =
      _mm512_cvtps_ph(_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(half_value), _mm512_castps_si512(sign))), _MM_FROUND_TO_NEAREST_INT);
  const __m256i negative = _mm256_srai_epi16(half, 15);
  const __m256i code = _mm256_sub_epi16(_mm256_srli_epi16(half, 7), _mm256_and_si256(negative, _mm256_set1_epi16(384)));
  return _mm256_cvtsepi16_epi8(code);
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
