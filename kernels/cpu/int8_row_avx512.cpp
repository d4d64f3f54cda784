// The INT8 row kernel (§5.2) in AVX-512 registers, bf16 words straight from the input and the model dtype
// bf16 (block_rows.hpp): each restates int8_code lane by lane, bit for bit; the property tests
// run the portable loop too.
#include "block_rows.hpp"

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>

#include "qpolicy/kernels/cpu/detail/bf16_quotient_avx512.hpp"
#include "qpolicy/numerics/detail/quantize_blocks.hpp"
#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::cpu::rows {

namespace {

// GCC 12's intrinsic headers build some results from an "undefined" register, which
// -Wmaybe-uninitialized reports once inlined here: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

/// Any INT8 row of bf16 words: amax_range's max over magnitude bits (with a NaN, the first NaN's
/// magnitude, as its propagating fold gives), s = rD(amax / 127), then per element rD(w / s)
/// (to_bf16's round-to-nearest-even on the bits), NaN to 0, the clamp to +-127 and the round half to
/// even of int8_code. Returns s.
QPOLICY_AVX512_F16C float any_int8_row(const std::uint16_t* words, std::int64_t cols, std::int8_t* q) {
  bool nan = false;
  // With a NaN, amax_range's fold gives the first NaN's magnitude (its payload carries into the scale).
  float amax = bf16_amax_avx512(words, cols, nan);
  if (nan)
    for (std::int64_t i = 0; i < cols; ++i)
      if (const float w = fp8::from_bf16(words[i]); w != w) {
        amax = fp8::abs_f32(w);
        break;
      }
  const float s = lp::int8_scale(element::bf16, amax);
  const __m512 scale = _mm512_set1_ps(s), limit = _mm512_set1_ps(127.0f), magic = _mm512_set1_ps(12582912.0f);
  // w / s by a reciprocal and one correction where that is exact (bf16_quotient_avx512.hpp).
  const bool by_reciprocal = detail::quotient_by_reciprocal(s);
  const detail::bf16_divisor16 divisor = detail::divisor16(by_reciprocal ? s : 1.0f);
  std::int64_t k = 0;
  for (; k + 16 <= cols; k += 16) {
    const __m512 w = detail::load16<true>(words, k);
    const __m512i u = _mm512_castps_si512(by_reciprocal ? detail::bf16_quotients16(w, divisor) : _mm512_div_ps(w, scale));
    // to_bf16: add 0x7FFF plus the kept lowest bit, drop the low half (a NaN lane is set to 0 below).
    const __m512i rounded = _mm512_and_si512(
        _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)))),
        _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)));
    const __m512 t = _mm512_castsi512_ps(rounded);
    const __mmask16 is_nan = _mm512_cmp_ps_mask(_mm512_castsi512_ps(u), _mm512_castsi512_ps(u), _CMP_UNORD_Q);
    const __m512 c = _mm512_max_ps(_mm512_min_ps(t, limit), _mm512_sub_ps(_mm512_setzero_ps(), limit));
    const __m512 r = _mm512_sub_ps(_mm512_add_ps(c, magic), magic);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + k), _mm512_cvtepi32_epi8(_mm512_maskz_cvttps_epi32(static_cast<__mmask16>(~is_nan), r)));
  }
  for (; k < cols; ++k) q[k] = lp::int8_code(element::bf16, fp8::from_bf16(words[k]), s);
  return s;
}

/// A finite, NaN-free INT8 row whose scale s takes quotients by its reciprocal, 32 elements a step:
/// w / s by the reciprocal and one correction (a zero quotient's sign is lost, which code 0 does not
/// keep anyway), rD by vcvtne2ps2bf16 (round-to-nearest-even, as to_bf16; tiny quotients it flushes to
/// zero give code 0 either way), back to float, the integer by round half to even, and the clamp to
/// +-127 by vpmovsdb's saturation to [-128, 127] and a byte max with -127.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,f16c"))) void finite_int8_row(const std::uint16_t* words, std::int64_t cols,
                                                                                                 float s, std::int8_t* q) {
  const detail::bf16_divisor16 divisor = detail::divisor16(s);
  std::int64_t k = 0;
  for (; k + 32 <= cols; k += 32) {
    const __m512 t0 = detail::bf16_finite_quotients16(detail::load16<true>(words, k), divisor);
    const __m512 t1 = detail::bf16_finite_quotients16(detail::load16<true>(words, k + 16), divisor);
    const __m512i rounded = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(t1, t0));  // t0's words low
    const __m512 r0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(rounded)), 16));
    const __m512 r1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(rounded, 1)), 16));
    const __m128i c0 = _mm512_cvtsepi32_epi8(_mm512_cvt_roundps_epi32(r0, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m128i c1 = _mm512_cvtsepi32_epi8(_mm512_cvt_roundps_epi32(r1, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256i codes = _mm256_max_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(c0), c1, 1), _mm256_set1_epi8(-127));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + k), codes);
  }
  for (; k < cols; ++k) q[k] = lp::int8_code(element::bf16, fp8::from_bf16(words[k]), s);
}

#pragma GCC diagnostic pop

}  // namespace

QPOLICY_AVX512_F16C float int8_row_bf16_avx512(const std::uint16_t* words, std::int64_t cols, std::int8_t* q) {
  // The row's amax from its bits first: a row without NaN or infinity whose scale divides by its
  // reciprocal takes the short loop where the CPU rounds to bf16 itself.
  const bool bf16_rounding = cpu_target_covers(cpu_target::avx3_zen4);
  if (bf16_rounding) {
    bool nan = false;
    std::uint16_t bits = 0;
    segment_amax_bits_avx512(words, cols, 1, cols, cols, &bits, &nan);
    const float s = lp::int8_scale(element::bf16, fp8::from_bf16(bits));
    if (!nan && bits < 0x7F80 && detail::quotient_by_reciprocal(s)) {
      finite_int8_row(words, cols, s, q);
      return s;
    }
  }
  return any_int8_row(words, cols, q);
}

}  // namespace qpolicy::cpu::rows
#endif
