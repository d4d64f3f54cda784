// The activation treatments' operands (treat_activations, weight_only_forward.cpp) from their codes in
// AVX-512 registers, sixteen elements per step: NVFP4 per-token values, and MXFP4 and MXFP8 values
// rounded to bf16. Each restates its portable loop lane by lane, bit for bit (the products are the same
// single float32 multiplications, the rounding fp8::to_bf16's integer steps); the property tests run
// both.
#include "block_rows.hpp"

#include "qpolicy/kernels/cpu/detail/e4m3_encoder.hpp"

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>

#include "qpolicy/numerics/block_formats.hpp"
#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::cpu::rows {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {

/// The sixteen e2m1 values, code c in lane c.
QPOLICY_AVX512_F16C __m512 e2m1_values16() {
  alignas(64) float values[16];
  for (int c = 0; c < 16; ++c) values[c] = lp::e2m1_value(static_cast<std::uint8_t>(c));
  return _mm512_load_ps(values);
}

/// The codes of 16 elements packed two per byte (element 2 i in byte i's low nibble), one per lane.
QPOLICY_AVX512_F16C inline __m512i nibbles16(const std::uint8_t* packed) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed));
  const __m128i low = _mm_and_si128(bytes, _mm_set1_epi8(0x0F));
  const __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0F));
  return _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(low, high));
}

/// rD(v) for bf16 on 16 lanes, as fp8::to_bf16 then from_bf16: round to nearest even by adding
/// 0x7FFF plus the kept lowest bit; a NaN keeps its high half with the quiet bit set.
QPOLICY_AVX512_F16C inline __m512 round_to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i kept_low = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(kept_low, _mm512_set1_epi32(0x7FFF)));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  const __m512i bits = _mm512_mask_or_epi32(rounded, nan, u, _mm512_set1_epi32(0x00400000));
  return _mm512_castsi512_ps(_mm512_and_si512(bits, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

QPOLICY_AVX512_F16C void nvfp4_token_values_avx512(const std::uint8_t* codes, const std::uint8_t* scales, std::int64_t blocks, float* out) {
  const __m512 table = e2m1_values16();
  for (std::int64_t b = 0; b < blocks; ++b) {
    const __m512i c = nibbles16(codes + 8 * b);
    // ±0 codes give +0 whatever the scale (a zero token's scales are NaN).
    const __mmask16 nonzero = _mm512_test_epi32_mask(c, _mm512_set1_epi32(7));
    const __m512 scale = _mm512_set1_ps(fp8::decode(scales[b]));
    _mm512_storeu_ps(out + 16 * b, _mm512_maskz_mul_ps(nonzero, _mm512_permutexvar_ps(c, table), scale));
  }
}

QPOLICY_AVX512_F16C void mxfp4_bf16_values_avx512(const std::uint8_t* codes, const std::uint8_t* scales, std::int64_t blocks, float* out) {
  const __m512 table = e2m1_values16();
  for (std::int64_t b = 0; b < blocks; ++b) {
    const __m512 scale = _mm512_set1_ps(lp::e8m0_value(scales[b]));
    for (int half = 0; half < 2; ++half) {
      const __m512 v = _mm512_mul_ps(_mm512_permutexvar_ps(nibbles16(codes + 16 * b + 8 * half), table), scale);
      _mm512_storeu_ps(out + 32 * b + 16 * half, round_to_bf16(v));
    }
  }
}

QPOLICY_AVX512_F16C void mxfp8_bf16_values_avx512(const std::uint8_t* codes, const std::uint8_t* scales, std::int64_t blocks,
                                                   const float* e4m3_values, float* out) {
  for (std::int64_t b = 0; b < blocks; ++b) {
    const __m512 scale = _mm512_set1_ps(lp::e8m0_value(scales[b]));
    for (int half = 0; half < 2; ++half) {
      const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + 32 * b + 16 * half)));
      const __m512 v = _mm512_mul_ps(_mm512_i32gather_ps(c, e4m3_values, 4), scale);
      _mm512_storeu_ps(out + 32 * b + 16 * half, round_to_bf16(v));
    }
  }
}

}  // namespace

#pragma GCC diagnostic pop

namespace {
/// Runs kernel(whole blocks) where this CPU has AVX-512; the elements written.
template <std::size_t Width, class Kernel>
std::size_t whole_blocks(std::size_t n, Kernel&& kernel) {
  if (!detail::has_avx512_kernels()) return 0;
  kernel(static_cast<std::int64_t>(n / Width));
  return n / Width * Width;
}
}  // namespace

std::size_t nvfp4_token_values_vectorized(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n, float* out) {
  return whole_blocks<16>(n, [&](std::int64_t blocks) { nvfp4_token_values_avx512(codes, scales, blocks, out); });
}
std::size_t mxfp4_bf16_values_vectorized(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n, float* out) {
  return whole_blocks<32>(n, [&](std::int64_t blocks) { mxfp4_bf16_values_avx512(codes, scales, blocks, out); });
}
std::size_t mxfp8_bf16_values_vectorized(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n, const float* e4m3_values,
                                         float* out) {
  return whole_blocks<32>(n, [&](std::int64_t blocks) { mxfp8_bf16_values_avx512(codes, scales, blocks, e4m3_values, out); });
}

}  // namespace qpolicy::cpu::rows

#else

namespace qpolicy::cpu::rows {
std::size_t nvfp4_token_values_vectorized(const std::uint8_t*, const std::uint8_t*, std::size_t, float*) { return 0; }
std::size_t mxfp4_bf16_values_vectorized(const std::uint8_t*, const std::uint8_t*, std::size_t, float*) { return 0; }
std::size_t mxfp8_bf16_values_vectorized(const std::uint8_t*, const std::uint8_t*, std::size_t, const float*, float*) { return 0; }
}  // namespace qpolicy::cpu::rows

#endif
