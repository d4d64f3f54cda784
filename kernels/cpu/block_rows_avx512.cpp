// The low-precision row kernels in AVX-512 registers (block_rows.hpp): MXFP4 and MXFP8 one
// 32-block at a time or 16 at once, NVFP4 16 blocks' scales as one register, INT8's element loop on 16
// lanes; from widened rows or straight from bf16 words. Each restates its portable row function
// (block_quantizer.cpp) lane by lane, bit for bit: the property tests run both.
#include "block_rows.hpp"

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>

#include <algorithm>

#include "qpolicy/kernels/cpu/detail/e2m1_avx512.hpp"
#include "qpolicy/kernels/cpu/detail/e4m3_avx512.hpp"
#include "qpolicy/numerics/detail/quantize_blocks.hpp"
#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::cpu::rows {

// GCC 12's intrinsic headers build some results from an "undefined" register, which
// -Wmaybe-uninitialized reports once inlined here: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define QPOLICY_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

/// The maxima of 16 registers' lanes, register b's in lane b: a tree of lane shuffles (each level halves
/// the registers and the lanes per register, so lanes of one register only ever meet lanes of the same
/// one), then one permute into block order. A NaN lane affects only its own register's result.
QPOLICY_AVX512 inline __m512 lane_maxima16(const __m512 (&v)[16]) {
  __m512 m[8], n[4], o[2];
  // [v_2k lanes max'd in halves | v_2k+1's]: 8 partial maxima each.
  for (int k = 0; k < 8; ++k)
    m[k] = _mm512_max_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x44), _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xEE));
  // 128-bit lane L of n_j: register 4j + L's 4 partials.
  for (int j = 0; j < 4; ++j)
    n[j] = _mm512_max_ps(_mm512_shuffle_f32x4(m[2 * j], m[2 * j + 1], 0x88), _mm512_shuffle_f32x4(m[2 * j], m[2 * j + 1], 0xDD));
  // Lane L of o_i: 2 partials each of registers 8i + L and 8i + 4 + L.
  for (int i = 0; i < 2; ++i)
    o[i] = _mm512_max_ps(_mm512_shuffle_ps(n[2 * i], n[2 * i + 1], 0x44), _mm512_shuffle_ps(n[2 * i], n[2 * i + 1], 0xEE));
  // Element 4L + q: register 4q + L.
  const __m512 t = _mm512_max_ps(_mm512_shuffle_ps(o[0], o[1], 0x88), _mm512_shuffle_ps(o[0], o[1], 0xDD));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), t);
}

/// The 16 code bytes of one MXFP4 block (e2m1_codes_avx512 of its values times `multiplier`), each pair
/// (2i, 2i + 1) one byte, low nibble first: a code and its odd neighbour meet in their 64-bit lane.
QPOLICY_AVX512 inline void mxfp4_codes(__m512 v0, __m512 v1, __m512 multiplier, std::uint8_t* codes) {
  const __m512i c0 = detail::e2m1_codes_avx512(_mm512_mul_ps(v0, multiplier));
  const __m512i c1 = detail::e2m1_codes_avx512(_mm512_mul_ps(v1, multiplier));
  const __m512i p0 = _mm512_or_si512(c0, _mm512_srli_epi64(c0, 28)), p1 = _mm512_or_si512(c1, _mm512_srli_epi64(c1, 28));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), _mm_unpacklo_epi64(_mm512_cvtepi64_epi8(p0), _mm512_cvtepi64_epi8(p1)));
}

/// One MXFP4 block held in two AVX-512 registers (§4.2 EVEN or §4.3 RCEIL): the block functions' scale and
/// multiplier, e2m1_flat's codes (e2m1_codes_avx512), the amax as a NaN-ignoring max. Writes 16 code bytes
/// and returns the scale byte.
QPOLICY_AVX512 inline std::uint8_t mxfp4_block_avx512(__m512 v0, __m512 v1, bool rceil, std::uint8_t* codes) {
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512 a0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v0), magnitude));
  const __m512 a1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v1), magnitude));
  // NaN lanes give the other operand; the zero-masked forms (all lanes kept) avoid GCC 12's headers'
  // undefined-source idiom, which -Wmaybe-uninitialized flags after inlining.
  const __m512 m = _mm512_maskz_max_ps(0xFFFF, a1, _mm512_maskz_max_ps(0xFFFF, a0, _mm512_setzero_ps()));
  // No NaN is left, so the order of the maxima does not matter: halve to one lane.
  const __m256 m8 = _mm256_max_ps(_mm512_castps512_ps256(m), _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(m), 1)));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  const float a = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
  const std::uint8_t b = rceil ? lp::e8m0_round_up(a * fp8::float_of(0x3E2AAAABu)) : lp::e8m0_even(a);
  mxfp4_codes(v0, v1, _mm512_set1_ps(rceil ? lp::flashinfer_inverse(b) : fp8::float_of(e8m0_reciprocal_bits(b))), codes);
  return b;
}

/// One MXFP8 block of a widened row in AVX-512 registers (§3.2 torch path, or §3.3 FlashInfer): the
/// scale byte and multiplier as the scalar row functions compute them, the codes x times it through
/// codes_of16 (for a finite block every rule of the two paths is saturating round-to-nearest-even there,
/// as in the F16C runs). A block holding a NaN or an infinity goes through the block function. Writes 32
/// codes and returns the scale byte. v0 and v1 hold the block's values (widened).
QPOLICY_AVX512_F16C inline std::uint8_t mxfp8_block_avx512(__m512 v0, __m512 v1, bool flashinfer, std::uint8_t* codes) {
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF), infinity = _mm512_set1_epi32(0x7F800000);
  const __m512i a0 = _mm512_and_si512(_mm512_castps_si512(v0), magnitude), a1 = _mm512_and_si512(_mm512_castps_si512(v1), magnitude);
  if (_mm512_cmpge_epu32_mask(a0, infinity) | _mm512_cmpge_epu32_mask(a1, infinity)) {
    float x[32];
    _mm512_storeu_ps(x, v0);
    _mm512_storeu_ps(x + 16, v1);
    return flashinfer ? lp::mxfp8_flashinfer_block(x, codes) : lp::mxfp8_torch_block(x, codes);
  }
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_castsi512_ps(a0), _mm512_castsi512_ps(a1)));
  std::uint8_t b;
  float m;
  if (flashinfer) {
    b = lp::e8m0_round_up(amax * fp8::float_of(fp8::inv_448_bits));
    m = lp::flashinfer_inverse(b);
  } else {
    const float tiny = fp8::float_of(0x00800000u);
    b = lp::e8m0_ceil((amax > tiny ? amax : tiny) / fp8::max_e4m3);
    m = fp8::float_of(e8m0_reciprocal_bits(b));
  }
  const __m512 multiplier = _mm512_set1_ps(m);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), detail::codes_of16<false>(_mm512_mul_ps(v0, multiplier)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + 16), detail::codes_of16<false>(_mm512_mul_ps(v1, multiplier)));
  return b;
}


/// The scales of 16 MXFP8 blocks from `first` on: their amaxes by reductions, then the 16 scale bytes and
/// multipliers as one register from the bits (mxfp8_block_avx512's scalar steps over lanes). Returns the
/// blocks holding a NaN or an infinity, which go through the block function.
template <bool Bf16>
QPOLICY_AVX512_F16C inline __mmask16 mxfp8_scales16(const void* x, std::int64_t first, bool flashinfer, std::uint8_t* scales, float* multipliers) {
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF), infinity = _mm512_set1_epi32(0x7F800000);
  const __m512i man_bits = _mm512_set1_epi32(0x7FFFFF), one = _mm512_set1_epi32(1), zero = _mm512_setzero_si512(), b254 = _mm512_set1_epi32(254);
  __m512 blocks16[16];
  __mmask16 special = 0;
  for (int b = 0; b < 16; ++b) {
    const __m512i a0 = _mm512_and_si512(_mm512_castps_si512(detail::load16<Bf16>(x, (first + b) * 32)), magnitude);
    const __m512i a1 = _mm512_and_si512(_mm512_castps_si512(detail::load16<Bf16>(x, (first + b) * 32 + 16)), magnitude);
    if (_mm512_cmpge_epu32_mask(a0, infinity) | _mm512_cmpge_epu32_mask(a1, infinity)) special = static_cast<__mmask16>(special | (1u << b));
    blocks16[b] = _mm512_castsi512_ps(_mm512_max_epu32(a0, a1));  // NaN and infinite blocks are special
  }
  const __m512 a = lane_maxima16(blocks16);
  __m512i b;
  if (flashinfer) {
    b = detail::e8m0_round_up16(_mm512_mul_ps(a, _mm512_set1_ps(fp8::float_of(fp8::inv_448_bits))));
    _mm512_store_si512(multipliers, detail::flashinfer_inverse16(b));
  } else {
    // e8m0_ceil(max(amax, tiny) / 448): normal exponent + (mantissa != 0), at most 254; subnormal 1
    // above 2^-127, else 0. The multiplier is e8m0_reciprocal_bits(b).
    const __m512 clamped = _mm512_max_ps(a, _mm512_set1_ps(fp8::float_of(0x00800000u)));
    const __m512i u = _mm512_castps_si512(_mm512_div_ps(clamped, _mm512_set1_ps(fp8::max_e4m3)));
    const __m512i exp = _mm512_srli_epi32(u, 23), man = _mm512_and_si512(u, man_bits);
    b = _mm512_min_epi32(_mm512_mask_add_epi32(exp, _mm512_test_epi32_mask(man, man), exp, one), b254);
    b = _mm512_mask_mov_epi32(b, _mm512_cmpeq_epi32_mask(exp, zero),
                              _mm512_maskz_mov_epi32(_mm512_cmpgt_epi32_mask(man, _mm512_set1_epi32(0x400000)), one));
    _mm512_store_si512(multipliers, detail::e8m0_reciprocal16(b));
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(scales), _mm512_maskz_cvtepi32_epi8(0xFFFF, b));
  return special;
}

/// Prefetches `bytes` from p on, a line at a time: the same blocks of the row quantized next, for the
/// pass that reads them first (the stream would otherwise stall there).
QPOLICY_AVX512 inline void prefetch_next_row(const void* p, int bytes) {
  for (int line = 0; line < bytes; line += 64) _mm_prefetch(static_cast<const char*>(p) + line, _MM_HINT_T0);
}

/// The MXFP8 blocks of a row (widened floats, or bf16 words straight from the input) with AVX-512
/// registers, in passes over up to 512 blocks of the row at a time: every 16 blocks' scales and
/// multipliers (mxfp8_scales16), then the codes. Separate passes keep each 16 blocks' long chain
/// (reductions, scale bits, division) out of the code loop's way. While the codes are written, the same
/// blocks of `next_row` are fetched.
template <bool Bf16>
QPOLICY_AVX512_F16C void mxfp8_blocks_avx512(const void* x, std::int64_t blocks, bool flashinfer, std::uint8_t* codes, std::uint8_t* scales,
                                             const void* next_row) {
  constexpr std::int64_t pass_groups = 32;
  alignas(64) float multipliers[pass_groups * 16];
  __mmask16 special[pass_groups];
  const std::int64_t groups = blocks / 16;
  for (std::int64_t g0 = 0; g0 < groups; g0 += pass_groups) {
    const std::int64_t n = std::min(pass_groups, groups - g0);
    for (std::int64_t g = 0; g < n; ++g)
      special[g] = mxfp8_scales16<Bf16>(x, (g0 + g) * 16, flashinfer, scales + (g0 + g) * 16, multipliers + g * 16);
    for (std::int64_t g = 0; g < n; ++g) {
      const std::int64_t j = (g0 + g) * 16;
      if (next_row) prefetch_next_row(static_cast<const std::uint16_t*>(next_row) + j * 32, 16 * 64);
      for (int k = 0; k < 16; ++k) {
        const __m512 v0 = detail::load16<Bf16>(x, (j + k) * 32), v1 = detail::load16<Bf16>(x, (j + k) * 32 + 16);
        std::uint8_t* q = codes + (j + k) * 32;
        if (special[g] >> k & 1u) {
          scales[j + k] = mxfp8_block_avx512(v0, v1, flashinfer, q);  // through the block function
          continue;
        }
        const __m512 m = _mm512_set1_ps(multipliers[g * 16 + k]);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q), detail::codes_of16<false>(_mm512_mul_ps(v0, m)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), detail::codes_of16<false>(_mm512_mul_ps(v1, m)));
      }
    }
  }
  for (std::int64_t j = groups * 16; j < blocks; ++j)
    scales[j] = mxfp8_block_avx512(detail::load16<Bf16>(x, j * 32), detail::load16<Bf16>(x, j * 32 + 16), flashinfer, codes + j * 32);
}

/// The maxima of 16 NVFP4 blocks of bf16 words (256 words from x), block b's in lane b as a float:
/// magnitudes compared as 16-bit integers (a bf16's order), two blocks per register, reduced by a tree of
/// lane shuffles and one permute into block order. `IgnoreNan`: a NaN word counts as 0; else a block
/// holding one has a NaN maximum (which makes its scale NaN: the block function takes it).
template <bool IgnoreNan>
QPOLICY_AVX512 inline __m512 bf16_block_maxima16(const std::uint16_t* x) {
  const __m512i magnitude = _mm512_set1_epi16(0x7FFF), infinity = _mm512_set1_epi16(0x7F80);
  __m512i w[8], p[4], q[2];
  for (int k = 0; k < 8; ++k) {
    const __m512i u = _mm512_and_si512(_mm512_loadu_si512(x + k * 32), magnitude);  // blocks 2k, 2k + 1
    w[k] = IgnoreNan ? _mm512_maskz_mov_epi16(_mm512_cmple_epu16_mask(u, infinity), u) : u;
  }
  // 128-bit lane L of p_k: block 4k + L's 8 partial maxima.
  for (int k = 0; k < 4; ++k)
    p[k] = _mm512_max_epu16(_mm512_shuffle_i32x4(w[2 * k], w[2 * k + 1], 0x88), _mm512_shuffle_i32x4(w[2 * k], w[2 * k + 1], 0xDD));
  // Lane L of q_k: 4 partials of block 8k + L, then 4 of block 8k + 4 + L.
  for (int k = 0; k < 2; ++k) q[k] = _mm512_max_epu16(_mm512_unpacklo_epi64(p[2 * k], p[2 * k + 1]), _mm512_unpackhi_epi64(p[2 * k], p[2 * k + 1]));
  // Dword c of lane L: 2 partials of block 4c + L; then its low word the maximum.
  const __m512 q0 = _mm512_castsi512_ps(q[0]), q1 = _mm512_castsi512_ps(q[1]);
  __m512i m = _mm512_max_epu16(_mm512_castps_si512(_mm512_shuffle_ps(q0, q1, 0x88)), _mm512_castps_si512(_mm512_shuffle_ps(q0, q1, 0xDD)));
  m = _mm512_max_epu16(m, _mm512_srli_epi32(m, 16));
  m = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), m);
  return _mm512_castsi512_ps(_mm512_slli_epi32(m, 16));  // the low word is a bf16: the top half of its float
}

/// The NaN-ignoring maxima of 16 NVFP4 blocks from `first` on, block b's in lane b (from bf16 words,
/// unless `IgnoreNan` is false, a NaN maximum for a block holding a NaN).
template <bool Bf16, bool IgnoreNan = true>
QPOLICY_AVX512_F16C inline __m512 nvfp4_maxima16(const void* x, std::int64_t first) {
  if constexpr (Bf16) {
    return bf16_block_maxima16<IgnoreNan>(static_cast<const std::uint16_t*>(x) + first * 16);
  } else {
    const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
    __m512 blocks16[16];
    for (int b = 0; b < 16; ++b) {
      const __m512 a = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(detail::load16<false>(x, (first + b) * 16)), magnitude));
      blocks16[b] = _mm512_maskz_max_ps(0xFFFF, a, _mm512_setzero_ps());  // a NaN lane gives 0
    }
    return lane_maxima16(blocks16);
  }
}

/// The scales of 16 NVFP4 blocks from their maxima `a` (sf = sat(encode * (amax * R6)) through
/// codes_of16, its value decoded through float16, the multiplier 1 / (scale * decode) or 0): writes the
/// 16 scale bytes and multipliers. Returns the blocks that must go through nvfp4_blocks: a NaN scale
/// product (a NaN encode scale, or 0 times an infinite one), or an infinite or NaN multiplier (an
/// infinite encode scale makes decode 0), where whose NaN each product keeps is nvfp4_blocks' to say.
QPOLICY_AVX512_F16C inline __mmask16 nvfp4_scales16(__m512 a, float encode, float decode, bool zero_if_scale_zero, std::uint8_t* scales,
                                                    float* multipliers) {
  const __m512 t = _mm512_mul_ps(_mm512_set1_ps(encode), _mm512_mul_ps(a, _mm512_set1_ps(fp8::float_of(0x3E2AAAABu))));
  const __mmask16 special = _mm512_cmp_ps_mask(t, t, _CMP_UNORD_Q);
  const __m128i sf = detail::codes_of16<false>(t);  // t >= 0: codes 0..0x7E
  // e4m3 code c as float16 bits c << 7 is the value times 2^-8 (exponents line up, subnormals too).
  const __m512 scale = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(sf), 7)), _mm512_set1_ps(0x1p8f));
  const __mmask16 zero = zero_if_scale_zero ? _mm512_cmp_ps_mask(scale, _mm512_setzero_ps(), _CMP_EQ_OQ)
                                            : _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_EQ_OQ);
  const __m512 m = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(scale, _mm512_set1_ps(decode)));
  const __mmask16 unusual = _mm512_cmp_ps_mask(_mm512_abs_ps(m), _mm512_set1_ps(fp8::float_of(0x7F800000u)), _CMP_NLT_UQ);
  _mm512_store_ps(multipliers, _mm512_mask_mov_ps(m, zero, _mm512_setzero_ps()));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(scales), sf);
  return static_cast<__mmask16>(special | (unusual & ~zero));
}

/// The e2m1 codes of 16 NVFP4 blocks from `first` on, x times each block's multiplier (x first: a NaN
/// product keeps x's NaN where x is one, as the block function's does). bf16 words go two blocks per
/// register, split into even and odd elements (a word shifted up, or masked), so a code byte is the even
/// element's code or'd with the odd one's shifted by 4, and one truncation stores both blocks.
template <bool Bf16>
QPOLICY_AVX512_F16C inline void nvfp4_codes16(const void* x, std::int64_t first, const float* multipliers, std::uint8_t* codes) {
  if constexpr (Bf16) {
    const auto* words = static_cast<const std::uint16_t*>(x) + first * 16;
    const __m512 all = _mm512_load_ps(multipliers);
    // Lanes 0-7 take block b's multiplier, lanes 8-15 block b + 1's.
    __m512i pair = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    for (int b = 0; b < 16; b += 2, pair = _mm512_add_epi32(pair, _mm512_set1_epi32(2))) {
      const __m512i w = _mm512_loadu_si512(words + b * 16);
      const __m512 m = _mm512_permutexvar_ps(pair, all);
      const __m512i even = detail::e2m1_codes_avx512(_mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), m));
      const __m512i odd = detail::e2m1_codes_avx512(_mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)))), m));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + (first + b) * 8), _mm512_cvtepi32_epi8(_mm512_or_si512(even, _mm512_slli_epi32(odd, 4))));
    }
  } else {
    for (int b = 0; b < 16; ++b) {
      const __m512i c = detail::e2m1_codes_avx512(_mm512_mul_ps(detail::load16<false>(x, (first + b) * 16), _mm512_set1_ps(multipliers[b])));
      // Each pair (2i, 2i + 1) of 4-bit codes into the low byte of its 64-bit lane (the odd code shifted
      // down from bit 32 to bit 4), then those 8 bytes.
      _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + (first + b) * 8), _mm512_cvtepi64_epi8(_mm512_or_si512(c, _mm512_srli_epi64(c, 28))));
    }
  }
}

/// Block j through nvfp4_blocks (a block nvfp4_scales16 marks, or one left over).
template <bool Bf16>
QPOLICY_AVX512_F16C inline void nvfp4_block_portable(const void* x, std::int64_t j, float encode, bool zero_if_scale_zero, std::uint8_t* codes,
                                                     std::uint8_t* scales) {
  alignas(64) float v[16];
  _mm512_store_ps(v, detail::load16<Bf16>(x, j * 16));
  nvfp4_blocks(v, 1, encode, zero_if_scale_zero, codes + j * 8, scales + j);
}

/// nvfp4_blocks with AVX-512 registers, in passes over up to 1024 blocks of the row at a time (the row
/// stays in L1/L2): every 16 blocks' maxima; their scales and multipliers; then the codes. Separate passes
/// keep each 16 blocks' long chain (reductions, scale encode, division) out of the code loop's way. For
/// NVFP4 per token (`token_scale` given), the token's scale st comes first from the row's NaN-ignoring
/// amax, read off the maxima when the row is one pass long, and the encode scale is 1 / st. Blocks
/// nvfp4_scales16 marks, and those left over, go through nvfp4_blocks. While the codes are written, the
/// same blocks of `next_row` are fetched: the stream would otherwise stall at the next row's first pass.
template <bool Bf16>
QPOLICY_AVX512_F16C void nvfp4_blocks_avx512(const void* x, std::int64_t blocks, float encode, bool zero_if_scale_zero, std::uint8_t* codes,
                                             std::uint8_t* scales, float* token_scale, const void* next_row) {
  constexpr std::int64_t pass_groups = 64;
  alignas(64) float multipliers[pass_groups * 16];
  __mmask16 special[pass_groups];
  const std::int64_t groups = blocks / 16, whole = groups * 16;
  if (token_scale) {
    float amax = 0.0f;
    if (groups <= pass_groups) {
      __m512 a = _mm512_setzero_ps();
      for (std::int64_t g = 0; g < groups; ++g) {
        const __m512 maxima = nvfp4_maxima16<Bf16>(x, g * 16);
        _mm512_store_ps(multipliers + g * 16, maxima);
        a = _mm512_max_ps(a, maxima);
      }
      amax = _mm512_reduce_max_ps(a);
      for (std::int64_t j = whole; j < blocks; ++j) {
        alignas(64) float v[16];
        _mm512_store_ps(v, detail::load16<Bf16>(x, j * 16));
        for (const float e : v)
          if (const float m = fp8::abs_f32(e); m > amax) amax = m;  // NaN compares false
      }
    } else if constexpr (Bf16) {
      bool nan = false;  // a row longer than one pass: its amax first
      amax = bf16_amax_avx512(static_cast<const std::uint16_t*>(x), blocks * 16, nan);
    } else {
      for (std::int64_t i = 0; i < blocks * 16; ++i)
        if (const float m = fp8::abs_f32(static_cast<const float*>(x)[i]); m > amax) amax = m;  // NaN compares false
    }
    *token_scale = lp::nvfp4_token_scale(amax);
    encode = 1.0f / *token_scale;  // a zero row gives +inf
  }
  const float decode = 1.0f / encode;
  for (std::int64_t g0 = 0; g0 < groups; g0 += pass_groups) {
    const std::int64_t n = std::min(pass_groups, groups - g0);
    const bool have_maxima = token_scale && groups <= pass_groups;
    for (std::int64_t g = 0; g < n; ++g) {
      // A block holding a NaN may as well get a NaN maximum here: its scale is then NaN, and the block
      // function takes it, NaN-ignoring amax and all.
      const __m512 a = have_maxima ? _mm512_load_ps(multipliers + g * 16) : nvfp4_maxima16<Bf16, false>(x, (g0 + g) * 16);
      special[g] = nvfp4_scales16(a, encode, decode, zero_if_scale_zero, scales + (g0 + g) * 16, multipliers + g * 16);
    }
    for (std::int64_t g = 0; g < n; ++g) {
      const std::int64_t first = (g0 + g) * 16;
      if (next_row) prefetch_next_row(static_cast<const std::uint16_t*>(next_row) + first * 16, 8 * 64);  // its first pass's blocks
      nvfp4_codes16<Bf16>(x, first, multipliers + g * 16, codes);
      for (unsigned s = special[g]; s != 0; s &= s - 1) {
        nvfp4_block_portable<Bf16>(x, first + __builtin_ctz(s), encode, zero_if_scale_zero, codes, scales);
      }
    }
  }
  for (std::int64_t j = whole; j < blocks; ++j) nvfp4_block_portable<Bf16>(x, j, encode, zero_if_scale_zero, codes, scales);
}

/// The NaN-ignoring amax of n bf16 words (amax_range's max over magnitude bits, NaN lanes masked out);
/// `nan` says whether there was a NaN.
QPOLICY_AVX512_F16C float bf16_amax_avx512(const std::uint16_t* words, std::int64_t n, bool& nan) {
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF), infinity = _mm512_set1_epi32(0x7F800000);
  __m512i acc = _mm512_setzero_si512();
  __mmask16 any = 0;
  std::int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const __m512i u = _mm512_and_si512(_mm512_castps_si512(detail::load16<true>(words, k)), magnitude);
    const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(u, infinity);
    acc = _mm512_mask_max_epu32(acc, static_cast<__mmask16>(~is_nan), acc, u);
    any = static_cast<__mmask16>(any | is_nan);
  }
  std::uint32_t a = _mm512_reduce_max_epu32(acc);
  nan = any != 0;
  for (; k < n; ++k) {
    const std::uint32_t u = fp8::bits_of(fp8::from_bf16(words[k])) & 0x7FFFFFFFu;
    if (u > 0x7F800000u) nan = true;
    else a = std::max(a, u);
  }
  return fp8::float_of(a);
}

/// The scale bytes and multipliers of 16 MXFP4 blocks from `first` on (mxfp4_block_avx512's scalar steps
/// over lanes): their NaN-ignoring amaxes by reductions, then EVEN (§4.2: the amax rounded to one
/// significand bit, its exponent less 2) or RCEIL (§4.3) from the bits.
template <bool Bf16>
QPOLICY_AVX512_F16C inline void mxfp4_scales16(const void* x, std::int64_t first, bool rceil, std::uint8_t* scales, float* multipliers) {
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
  __m512 blocks16[16];
  for (int b = 0; b < 16; ++b) {
    const __m512 a0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(detail::load16<Bf16>(x, (first + b) * 32)), magnitude));
    const __m512 a1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(detail::load16<Bf16>(x, (first + b) * 32 + 16)), magnitude));
    blocks16[b] = _mm512_maskz_max_ps(0xFFFF, a1, _mm512_maskz_max_ps(0xFFFF, a0, _mm512_setzero_ps()));  // NaN lanes give the other
  }
  const __m512 a = lane_maxima16(blocks16);
  const auto s = rceil ? detail::mxfp4_rceil_scales_of(a) : detail::mxfp4_even_scales_of(a);
  _mm512_store_ps(multipliers, s.multipliers);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(scales), _mm512_cvtepi32_epi8(s.bytes));
}

/// mxfp4_blocks with AVX-512 registers, from a widened row or bf16 words straight from the input, in
/// passes over up to 512 blocks: every 16 blocks' scales and multipliers (mxfp4_scales16), then the
/// codes, which keeps each 16 blocks' long chain (reductions, scale bits) out of the code loop's way.
template <bool Bf16>
QPOLICY_AVX512_F16C void mxfp4_blocks_avx512(const void* x, std::int64_t blocks, bool rceil, std::uint8_t* codes, std::uint8_t* scales) {
  constexpr std::int64_t pass_groups = 32;
  alignas(64) float multipliers[pass_groups * 16];
  const std::int64_t groups = blocks / 16;
  for (std::int64_t g0 = 0; g0 < groups; g0 += pass_groups) {
    const std::int64_t n = std::min(pass_groups, groups - g0);
    for (std::int64_t g = 0; g < n; ++g) mxfp4_scales16<Bf16>(x, (g0 + g) * 16, rceil, scales + (g0 + g) * 16, multipliers + g * 16);
    for (std::int64_t j = g0 * 16; j < (g0 + n) * 16; ++j)
      mxfp4_codes(detail::load16<Bf16>(x, j * 32), detail::load16<Bf16>(x, j * 32 + 16), _mm512_set1_ps(multipliers[j - g0 * 16]), codes + j * 16);
  }
  for (std::int64_t j = groups * 16; j < blocks; ++j)
    scales[j] = mxfp4_block_avx512(detail::load16<Bf16>(x, j * 32), detail::load16<Bf16>(x, j * 32 + 16), rceil, codes + j * 16);
}

template void mxfp4_blocks_avx512<false>(const void*, std::int64_t, bool, std::uint8_t*, std::uint8_t*);
template void mxfp4_blocks_avx512<true>(const void*, std::int64_t, bool, std::uint8_t*, std::uint8_t*);
template void mxfp8_blocks_avx512<false>(const void*, std::int64_t, bool, std::uint8_t*, std::uint8_t*, const void*);
template void mxfp8_blocks_avx512<true>(const void*, std::int64_t, bool, std::uint8_t*, std::uint8_t*, const void*);
template void nvfp4_blocks_avx512<false>(const void*, std::int64_t, float, bool, std::uint8_t*, std::uint8_t*, float*, const void*);
template void nvfp4_blocks_avx512<true>(const void*, std::int64_t, float, bool, std::uint8_t*, std::uint8_t*, float*, const void*);

#pragma GCC diagnostic pop

}  // namespace qpolicy::cpu::rows
#endif
