#pragma once
// Internal to decode_rows_avx512.hpp: what the weight-row decoders of the decode-batch GEMM share on
// AVX-512 BF16: masked loads of partial steps, the value tables (e4m3 words and bytes, per-scale byte
// tables of MXFP8, MXFP4 and NVFP4, INT8's magnitudes) and the byte-permute steps that turn codes into
// bf16 words, with the element orders they leave.
#include "decode_gemm.hpp"

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "qpolicy/numerics/numerics.hpp"

#define QPOLICY_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
// Byte permutes (VBMI): one uop where a word permute takes two or three on Intel cores.
#define QPOLICY_AVX512_VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi")))

namespace qpolicy::cpu::detail::decode_rows {

// GCC 12's intrinsic headers build some results from an "undefined" register (see e4m3_avx512.hpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

using schemes::formula;

inline constexpr std::int64_t step = 32;  // elements of a weight row per vdpbf16ps

/// Whether the CPU has the byte permutes of the pair decoders (AVX512-VBMI).
inline bool has_byte_permutes() {
  return cpu_target_covers(cpu_target::avx3_zen4);
}

/// Bits of the first `count` (<= 32) lanes.
inline __mmask32 lanes32(std::int64_t count) { return count >= 32 ? ~__mmask32{0} : (__mmask32{1} << count) - 1; }

/// The first `count` of 32 bytes, or 16, or words, zero past count (plain loads for whole steps).
QPOLICY_AVX512_BF16 inline __m256i load_bytes32(const std::uint8_t* p, std::int64_t count) {
  return count == 32 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_maskz_loadu_epi8(lanes32(count), p);
}
QPOLICY_AVX512_BF16 inline __m128i load_bytes16(const std::uint8_t* p, std::int64_t count) {
  return count == 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)) : _mm_maskz_loadu_epi8(static_cast<__mmask16>(lanes32(count)), p);
}
QPOLICY_AVX512_BF16 inline __m512i load_words32(const std::uint16_t* p, std::int64_t count) {
  return count == 32 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(lanes32(count), p);
}
QPOLICY_AVX512_BF16 inline __m512i keep_words(__m512i v, std::int64_t count) { return count == 32 ? v : _mm512_maskz_mov_epi16(lanes32(count), v); }

/// The bf16 words of the 128 e4m3 magnitudes (code & 0x7F), in four registers of 32: exact (e4m3 has
/// 3 mantissa bits, bf16 7), 0x7F NaN.
struct e4m3_word_table {
  __m512i quarter[4];
  QPOLICY_AVX512_BF16 e4m3_word_table() {
    alignas(64) std::uint16_t words[128];
    for (int c = 0; c < 128; ++c) words[c] = fp8::to_bf16(fp8::decode(static_cast<std::uint8_t>(c)));
    for (int q = 0; q < 4; ++q) quarter[q] = _mm512_load_si512(words + 32 * q);
  }
};

QPOLICY_AVX512_BF16 inline const e4m3_word_table& e4m3_words_table() {
  static const e4m3_word_table table;
  return table;
}

/// e4m3_word_table's words split into bytes: the high bytes (sign clear) and the low bytes of the 128
/// magnitudes, 64 to a register, for two-register byte permutes (which index by the low 7 bits).
struct e4m3_byte_table {
  __m512i high[2], low[2];
  e4m3_byte_table() = default;
  QPOLICY_AVX512_BF16 explicit e4m3_byte_table(const std::uint16_t (&words)[128]) {
    alignas(64) std::uint8_t bytes[2][128];
    for (int c = 0; c < 128; ++c) {
      bytes[0][c] = static_cast<std::uint8_t>(words[c] >> 8);
      bytes[1][c] = static_cast<std::uint8_t>(words[c]);
    }
    for (int h = 0; h < 2; ++h) {
      high[h] = _mm512_load_si512(bytes[0] + 64 * h);
      low[h] = _mm512_load_si512(bytes[1] + 64 * h);
    }
  }
  /// The bytes of the magnitudes' bf16 words times 2^exponent (byte_table_of_scale).
  QPOLICY_AVX512_BF16 static e4m3_byte_table scaled(int exponent) {
    std::uint16_t words[128];
    for (int c = 0; c < 128; ++c) words[c] = fp8::to_bf16(std::ldexp(fp8::decode(static_cast<std::uint8_t>(c)), exponent));
    return e4m3_byte_table(words);
  }
};

QPOLICY_AVX512_BF16 inline const e4m3_byte_table& e4m3_bytes_table() {
  static const e4m3_byte_table table = e4m3_byte_table::scaled(0);
  return table;
}

/// For each E8M0 scale byte b, the e4m3 magnitudes times 2^(b - 127) (exact for MXFP8's exact scales),
/// byte 0 zeros (Marlin's decode), so that an MXFP8 block's words come from its scale's table.
struct mxfp8_byte_tables {
  e4m3_byte_table of_scale[256];
  QPOLICY_AVX512_BF16 mxfp8_byte_tables() {
    const std::uint16_t zeros[128] = {};
    of_scale[0] = e4m3_byte_table(zeros);
    for (int b = 1; b < 256; ++b) of_scale[b] = e4m3_byte_table::scaled(b - 127);
  }
};

QPOLICY_AVX512_BF16 inline const mxfp8_byte_tables& mxfp8_bytes_tables() {
  static const mxfp8_byte_tables tables;
  return tables;
}

/// Which element of a 64-element pair of steps word j of step `half` holds when the words are built
/// by byte unpacks (e4m3_word_pair): each 128-bit lane L interleaves bytes 16 L .. 16 L + 7 (first
/// step) or 16 L + 8 .. 16 L + 15 (second step) of the low and high byte registers.
constexpr std::int64_t step_pair_element(std::int64_t half, std::int64_t j) { return 16 * (j / 8) + 8 * half + j % 8; }

/// step_pair_element for packed 4-bit codes, whose byte registers hold the low nibbles (the even
/// elements) in bytes 0..31 and the high nibbles (the odd elements) in bytes 32..63.
constexpr std::int64_t nibble_pair_element(std::int64_t half, std::int64_t j) {
  const std::int64_t lane = step_pair_element(half, j);
  return lane < 32 ? 2 * lane : 2 * (lane - 32) + 1;
}

/// 64 e4m3 codes as bf16 words in two registers, in step_pair_element's order: the high and low bytes
/// of each word by table (two byte permutes), the sign from the code, then the bytes unpacked into
/// words: five vector uops for 64 words, against ten for 32 by word permutes.
QPOLICY_AVX512_VBMI inline void e4m3_word_pair(__m512i codes, const e4m3_byte_table& table, __m512i& first, __m512i& second) {
  const __m512i high = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(table.high[0], codes, table.high[1]), codes,
                                                 _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);  // high | (code & sign)
  const __m512i low = _mm512_permutex2var_epi8(table.low[0], codes, table.low[1]);
  first = _mm512_unpacklo_epi8(low, high);
  second = _mm512_unpackhi_epi8(low, high);
}

/// e4m3_word_pair with one table for codes 0..31 (the first 32-element block) and another for codes
/// 32..63: each permute writes its half over the codes (merge-masked), seven uops for 64 words.
QPOLICY_AVX512_VBMI inline void e4m3_word_pair(__m512i codes, const e4m3_byte_table& first_block, const e4m3_byte_table& second_block,
                                               __m512i& first, __m512i& second) {
  constexpr __mmask64 low_half = 0x00000000FFFFFFFFull, high_half = ~low_half;
  const __m512i high_of_first = _mm512_mask2_permutex2var_epi8(first_block.high[0], codes, low_half, first_block.high[1]);
  const __m512i high = _mm512_mask2_permutex2var_epi8(second_block.high[0], high_of_first, high_half, second_block.high[1]);
  const __m512i low_of_first = _mm512_mask2_permutex2var_epi8(first_block.low[0], codes, low_half, first_block.low[1]);
  const __m512i low = _mm512_mask2_permutex2var_epi8(second_block.low[0], low_of_first, high_half, second_block.low[1]);
  const __m512i signed_high = _mm512_ternarylogic_epi32(high, codes, _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);
  first = _mm512_unpacklo_epi8(low, signed_high);
  second = _mm512_unpackhi_epi8(low, signed_high);
}

/// bf16 words with `rebias` added to the exponent of each finite nonzero one (an E8M0 scale folded in;
/// callers keep the results normal and finite); zeros, infinities and NaNs unchanged.
QPOLICY_AVX512_BF16 inline __m512i rebias_finite_nonzero(__m512i words, __m512i rebias) {
  const __m512i magnitude = _mm512_and_si512(words, _mm512_set1_epi16(0x7FFF));
  // magnitude - 1 < 0x7F7F (unsigned): neither 0 nor at least 0x7F80 (an infinity or a NaN).
  const __mmask32 finite_nonzero = _mm512_cmplt_epu16_mask(_mm512_sub_epi16(magnitude, _mm512_set1_epi16(1)), _mm512_set1_epi16(0x7F7F));
  return _mm512_mask_add_epi16(words, finite_nonzero, words, rebias);
}

/// The first `count` (<= 64) of 64 codes, zero past count.
QPOLICY_AVX512_VBMI inline __m512i load_bytes64(const std::uint8_t* p, std::int64_t count) {
  return count >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8((__mmask64{1} << count) - 1, p);
}

/// 32 e4m3 codes as bf16 words, by table; `rebias` is added to the exponent of every finite nonzero
/// value (an E8M0 scale folded in; callers keep the results normal and finite).
template <bool Rebias>
QPOLICY_AVX512_BF16 inline __m512i e4m3_words(__m256i codes, const e4m3_word_table& table, __m512i rebias) {
  const __m512i w = _mm512_cvtepu8_epi16(codes);
  const __m512i low = _mm512_permutex2var_epi16(table.quarter[0], w, table.quarter[1]);   // magnitudes 0..63
  const __m512i high = _mm512_permutex2var_epi16(table.quarter[2], w, table.quarter[3]);  // 64..127
  __m512i v = _mm512_mask_mov_epi16(low, _mm512_test_epi16_mask(w, _mm512_set1_epi16(0x40)), high);
  if constexpr (Rebias) {
    const __m512i magnitude = _mm512_and_si512(w, _mm512_set1_epi16(0x7F));
    const __mmask32 finite_nonzero = _mm512_test_epi16_mask(magnitude, magnitude) & _mm512_cmpneq_epi16_mask(magnitude, _mm512_set1_epi16(0x7F));
    v = _mm512_mask_add_epi16(v, finite_nonzero, v, rebias);
  }
  return _mm512_ternarylogic_epi32(v, _mm512_slli_epi16(w, 8), _mm512_set1_epi16(static_cast<short>(0x8000)), 0xF8);  // v | (w << 8 & sign)
}

/// 32 e2m1 codes (16 bytes, the even element in the low nibble) as word indices in element order.
QPOLICY_AVX512_BF16 inline __m512i e2m1_indices(__m128i packed) {
  const __m512i d = _mm512_cvtepu8_epi32(packed);
  return _mm512_ternarylogic_epi32(d, _mm512_slli_epi32(d, 12), _mm512_set1_epi32(0x000F000F), 0xA8);  // (d | d << 12) & mask
}

/// The sixteen e2m1 values as bf16 words (codes 0..15), and as floats.
QPOLICY_AVX512_BF16 inline __m512i e2m1_word_table() {
  return _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<short>(0xC0C0), static_cast<short>(0xC080),
                          static_cast<short>(0xC040), static_cast<short>(0xC000), static_cast<short>(0xBFC0), static_cast<short>(0xBF80),
                          static_cast<short>(0xBF00), static_cast<short>(0x8000), 0x40C0, 0x4080, 0x4040, 0x4000, 0x3FC0, 0x3F80, 0x3F00, 0);
}
QPOLICY_AVX512_BF16 inline __m512 e2m1_float_table() {
  return _mm512_set_ps(-6.0f, -4.0f, -3.0f, -2.0f, -1.5f, -1.0f, -0.5f, -0.0f, 6.0f, 4.0f, 3.0f, 2.0f, 1.5f, 1.0f, 0.5f, 0.0f);
}

/// For each e4m3 scale byte, its value times the sixteen e2m1 values as bf16 words (exact: 2 significant
/// bits times 4), so that an NVFP4 step's two blocks take two loads for their 32-word table.
struct nvfp4_word_table {
  alignas(64) std::uint16_t words[256][16];
  QPOLICY_AVX512_BF16 nvfp4_word_table() {
    const auto& e4m3 = e4m3_values();
    for (int s = 0; s < 256; ++s)
      _mm256_store_si256(reinterpret_cast<__m256i*>(words[s]),
                         (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(e2m1_float_table(), _mm512_set1_ps(e4m3[static_cast<std::size_t>(s)]))));
  }
};

QPOLICY_AVX512_BF16 inline const nvfp4_word_table& nvfp4_words_table() {
  static const nvfp4_word_table table;
  return table;
}


/// For each scale byte, a 4-bit format's sixteen values times that scale as bf16 words split into
/// bytes: 16 high bytes, then 16 low bytes (two formats' tables: MXFP4's E8M0 and NVFP4's e4m3 scales).
struct fp4_byte_tables {
  alignas(32) std::uint8_t of_scale[256][32];
  template <class Words>
  explicit fp4_byte_tables(Words words_of_scale) {
    for (int b = 0; b < 256; ++b)
      for (int c = 0; c < 16; ++c) {
        const std::uint16_t word = words_of_scale(b, c);
        of_scale[b][c] = static_cast<std::uint8_t>(word >> 8);
        of_scale[b][16 + c] = static_cast<std::uint8_t>(word);
      }
  }
  /// Scale byte b's table, 32 bytes.
  QPOLICY_AVX512_BF16 __m256i at(std::uint8_t b) const { return _mm256_load_si256(reinterpret_cast<const __m256i*>(of_scale[b])); }
};

/// 32 bytes of packed 4-bit codes (64 elements) at p, the first `bytes` of them (zero past), as byte
/// indices: the low nibbles in bytes 0..31, the high nibbles in bytes 32..63, each ORed with `offsets`
/// (which table a byte takes). A whole 32 is one broadcast load and a shift of its upper half (no
/// lane insert, which would take the shuffle port the permutes need).
QPOLICY_AVX512_VBMI inline __m512i nibble_indices(const std::uint8_t* p, std::int64_t bytes, __m512i offsets) {
  const __m256i packed = bytes >= 32 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_maskz_loadu_epi8(lanes32(bytes), p);
  const __m512i twice = _mm512_broadcast_i64x4(packed);
  const __m512i both = _mm512_mask_srli_epi16(twice, 0xFFFF0000u, twice, 4);
  return _mm512_ternarylogic_epi32(both, _mm512_set1_epi8(0x0F), offsets, 0xEA);  // (both & 0x0F) | offsets
}

/// The words of 64 elements whose high bytes are table[indices] and low bytes table[indices | 16],
/// unpacked into two steps (nibble_pair_element's order), by a one- or two-register byte permute.
QPOLICY_AVX512_VBMI inline void fp4_word_pair(__m512i indices, __m512i table, __m512i& first, __m512i& second) {
  const __m512i high = _mm512_permutexvar_epi8(indices, table);
  const __m512i low = _mm512_permutexvar_epi8(_mm512_or_si512(indices, _mm512_set1_epi8(16)), table);
  first = _mm512_unpacklo_epi8(low, high);
  second = _mm512_unpackhi_epi8(low, high);
}
QPOLICY_AVX512_VBMI inline void fp4_word_pair(__m512i indices, __m512i table, __m512i table_high, __m512i& first, __m512i& second) {
  const __m512i high = _mm512_permutex2var_epi8(table, indices, table_high);
  const __m512i low = _mm512_permutex2var_epi8(table, _mm512_or_si512(indices, _mm512_set1_epi8(16)), table_high);
  first = _mm512_unpacklo_epi8(low, high);
  second = _mm512_unpackhi_epi8(low, high);
}

/// MXFP4's and NVFP4's byte tables by scale byte: e2m1 times 2^(b - 127) (exact for MXFP4's exact
/// scales), and nvfp4_word_table's words.
QPOLICY_AVX512_BF16 inline const fp4_byte_tables& mxfp4_bytes_tables() {
  static const fp4_byte_tables tables([](int b, int c) {
    constexpr float e2m1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    return fp8::to_bf16(std::ldexp(e2m1[c], b - 127));
  });
  return tables;
}
QPOLICY_AVX512_BF16 inline const fp4_byte_tables& nvfp4_bytes_tables() {
  static const fp4_byte_tables tables([](int b, int c) { return nvfp4_words_table().words[b][c]; });
  return tables;
}

/// The bytes of the bf16 words of the INT8 magnitudes by their low 7 bits: entry 0 holds 128, so that
/// -128's magnitude (byte 0x80) finds it; code 0 is masked to zero.
QPOLICY_AVX512_BF16 inline const e4m3_byte_table& int8_bytes_table() {
  static const e4m3_byte_table table = [] {
    std::uint16_t words[128];
    for (int c = 0; c < 128; ++c) words[c] = fp8::to_bf16(static_cast<float>(c == 0 ? 128 : c));
    return e4m3_byte_table(words);
  }();
  return table;
}

#pragma GCC diagnostic pop

}  // namespace qpolicy::cpu::detail::decode_rows

#endif
