// The amax passes over bf16 words in AVX-512 registers (block_rows.hpp): a magnitude's 15 bits
// order like its value, so the segments' maxima are unsigned 16-bit maxima of the words less their
// sign, 32 at a time, folded across rows in registers and reduced once per segment. NaN words (above
// infinity's 0x7F80) raise their segment's maximum above 0x7F80, which is how the caller learns of them.
#include "block_rows.hpp"

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>

#include <algorithm>

namespace qpolicy::cpu::rows {

namespace {

/// The largest of 32 unsigned 16-bit lanes: halves folded down to eight lanes, whose complements'
/// minimum phminposuw finds.
QPOLICY_AVX512_F16C inline std::uint16_t max_epu16(__m512i v) {
  // The zero-masked extracts avoid GCC 12's headers' undefined-source idiom (-Wmaybe-uninitialized).
  const __m256i m256 = _mm256_max_epu16(_mm512_maskz_extracti64x4_epi64(0xF, v, 0), _mm512_maskz_extracti64x4_epi64(0xF, v, 1));
  const __m128i m128 = _mm_max_epu16(_mm256_castsi256_si128(m256), _mm256_extracti128_si256(m256, 1));
  return static_cast<std::uint16_t>(~_mm_cvtsi128_si32(_mm_minpos_epu16(_mm_xor_si128(m128, _mm_set1_epi32(-1)))));
}

/// Words [c0, c1) of a row, less their signs, folded into a.
QPOLICY_AVX512_F16C inline __m512i fold_magnitudes(__m512i a, const std::uint16_t* row, std::int64_t c0, std::int64_t c1) {
  const __m512i magnitude = _mm512_set1_epi16(0x7FFF);
  std::int64_t c = c0;
  for (; c + 32 <= c1; c += 32) a = _mm512_max_epu16(a, _mm512_and_si512(_mm512_loadu_si512(row + c), magnitude));
  if (c < c1) {
    const __mmask32 tail = static_cast<__mmask32>((1ull << (c1 - c)) - 1);
    a = _mm512_max_epu16(a, _mm512_and_si512(_mm512_maskz_loadu_epi16(tail, row + c), magnitude));
  }
  return a;
}

}  // namespace

QPOLICY_AVX512_F16C void segment_amax_bits_avx512(const std::uint16_t* words, std::int64_t stride, std::int64_t rows, std::int64_t n,
                                                  std::int64_t width, std::uint16_t* acc, bool* nan) {
  // Eight segments' accumulators at a time, row by row: the reads stay in row order.
  constexpr std::int64_t at_once = 8;
  const std::int64_t segments = (n + width - 1) / width;
  bool any = false;
  for (std::int64_t j0 = 0; j0 < segments; j0 += at_once) {
    const std::int64_t count = std::min(at_once, segments - j0);
    __m512i maxima[at_once];
    for (auto& m : maxima) m = _mm512_setzero_si512();
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < count; ++j) {
        const std::int64_t c0 = (j0 + j) * width;
        maxima[j] = fold_magnitudes(maxima[j], words + r * stride, c0, std::min(n, c0 + width));
      }
    for (std::int64_t j = 0; j < count; ++j) {
      const std::uint16_t m = max_epu16(maxima[j]);
      any = any || m > 0x7F80;
      acc[j0 + j] = std::max(acc[j0 + j], m);
    }
  }
  *nan = *nan || any;
}

}  // namespace qpolicy::cpu::rows
#endif
