#pragma once
// Internal to decode_gemm_avx512.cpp: the weight-row decoders of the decode-batch GEMM on AVX-512 BF16.
// A row's `words(k0, count)` gives a 32-element step as bf16 words in a register, exactly the formula's
// element values where `exact(k0)` says so: e4m3 codes (the FP8 GEMMs), MXFP8, MXFP4, NVFP4, LUT-B and
// INT8 rows, with the loads and tables they share.
#include "decode_gemm.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "qpolicy/numerics/detail/low_precision_blocks.hpp"
#include "qpolicy/numerics/detail/lut_b_tile.hpp"
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

/// Whether a row decoder gives two steps at a time (word_pair), in the order of its
/// pair_element(half, j): the element of the pair that word j of step `half` holds. The activations'
/// B tiles then take the same order.
template <class Row>
concept decodes_step_pairs = requires(const Row& row, __m512i& words) { row.word_pair(std::int64_t{}, std::int64_t{}, words, words); };

/// A row type's element order within a pair of steps, or none (natural order, single steps).
using pair_order = std::int64_t (*)(std::int64_t half, std::int64_t j);
/// The steps of k elements: whole pairs of steps where the decoder gives pairs.
constexpr std::int64_t steps_of(std::int64_t k, bool step_pairs) { return step_pairs ? 2 * ((k + 2 * step - 1) / (2 * step)) : (k + step - 1) / step; }

/// Element j of step t of a K order in which each pair of steps is in `order` (natural without one).
constexpr std::int64_t element_of(pair_order order, std::int64_t t, std::int64_t j) {
  return order ? (t / 2) * 2 * step + order(t % 2, j) : t * step + j;
}

template <class Row>
constexpr pair_order pair_order_of() {
  if constexpr (decodes_step_pairs<Row>) return &Row::pair_element;
  else return nullptr;
}

/// A weight row's decoder: `words(k0, count)` gives elements [k0, k0 + count) (count <= 32, a whole
/// block unless it is the row's end) as bf16 words, zero past count; `exact(k0)` says whether they are
/// the formula's values exactly, each zero or of magnitude at least 2^-60 (so that a product with an
/// activation of at least 2^-60 is a normal float, which vdpbf16ps does not flush); else
/// `values(k0, count, out)` gives them in float32 (weight_operand). e4m3 codes are at least 2^-9,
/// NVFP4's values 2^-10, INT8's 1.
/// A row with `word_pair(k0, count, first, second)` also gives 64 elements [k0, k0 + count) at a time
/// as two steps' words in step_pair_element's order (zero past count), for the AMX tiles.
struct e4m3_row {
  static constexpr std::int64_t pair_element(std::int64_t half, std::int64_t j) { return step_pair_element(half, j); }
  const std::uint8_t* codes;
  const e4m3_word_table* table;
  const e4m3_byte_table* bytes;
  const std::uint8_t* code_at(std::int64_t k0) const { return codes + k0; }
  static bool exact(std::int64_t) { return true; }
  static bool all_exact() { return true; }
  QPOLICY_AVX512_BF16 __m512i words(std::int64_t k0, std::int64_t count) const {
    return e4m3_words<false>(load_bytes32(codes + k0, count), *table, _mm512_setzero_si512());
  }
  QPOLICY_AVX512_VBMI void word_pair(std::int64_t k0, std::int64_t count, __m512i& first, __m512i& second) const {
    e4m3_word_pair(load_bytes64(codes + k0, count), *bytes, first, second);
  }
  void values(std::int64_t, std::int64_t, float*) const {}
};

template <formula F>
struct formula_row;

// MXFP8 (Marlin's decode: scale byte 0 is 0): the scale's exponent folded into the words, taken for
// scale bytes 76..246 (every nonzero value in [2^-60, 2^128), so its products with activations of at
// least 2^-60 are normal floats); byte 0 gives zeros.
template <>
struct formula_row<formula::mxfp8_torch> {
  static constexpr std::int64_t pair_element(std::int64_t half, std::int64_t j) { return step_pair_element(half, j); }
  const lp_matrix* m;
  std::int64_t n;
  const std::uint8_t* codes = m->codes.data() + n * m->cols;
  const std::uint8_t* scales = m->block_scales.data() + n * (m->cols / 32);
  const e4m3_word_table* table = &e4m3_words_table();
  const mxfp8_byte_tables* bytes = &mxfp8_bytes_tables();
  const std::uint8_t* code_at(std::int64_t k0) const { return codes + k0; }
  std::uint8_t scale(std::int64_t k0) const { return scales[static_cast<std::uint64_t>(k0) / 32]; }
  static bool exact_scale(std::uint8_t b) { return b == 0 || (b >= 76 && b <= 246); }
  bool exact(std::int64_t k0) const { return exact_scale(scale(k0)); }
  bool all_exact() const { return std::all_of(scales, scales + m->cols / 32, exact_scale); }
  QPOLICY_AVX512_BF16 __m512i words(std::int64_t k0, std::int64_t count) const {
    const std::uint8_t b = scale(k0);
    if (b == 0) return _mm512_setzero_si512();
    const __m256i codes = load_bytes32(this->codes + k0, count);
    return keep_words(e4m3_words<true>(codes, *table, _mm512_set1_epi16(static_cast<short>((b - 127) << 7))), count);
  }
  QPOLICY_AVX512_VBMI void word_pair(std::int64_t k0, std::int64_t count, __m512i& first, __m512i& second) const {
    const std::uint8_t second_scale = count > 32 ? scale(k0 + 32) : 0;
    e4m3_word_pair(load_bytes64(codes + k0, count), bytes->of_scale[scale(k0)], bytes->of_scale[second_scale], first, second);
  }
  void values(std::int64_t k0, std::int64_t count, float* out) const {
    for (std::int64_t t = 0; t < count; ++t)
      out[t] = lp::weight_operand<formula::mxfp8_torch>(m->codes.data(), m->block_scales.data(), m->cols, n, k0 + t);
  }
};

// MXFP4: the scale's exponent folded into the sixteen-word table, taken for scale bytes 68..252 (every
// nonzero value in [2^-60, 2^128)).
template <>
struct formula_row<formula::mxfp4_even> {
  static constexpr std::int64_t pair_element(std::int64_t half, std::int64_t j) { return nibble_pair_element(half, j); }
  const lp_matrix* m;
  std::int64_t n;
  const fp4_byte_tables* bytes = &mxfp4_bytes_tables();
  const std::uint8_t* codes = m->codes.data() + n * m->cols / 2;
  const std::uint8_t* scales = m->block_scales.data() + n * (m->cols / 32);
  const std::uint8_t* code_at(std::int64_t k0) const { return codes + static_cast<std::uint64_t>(k0) / 2; }
  std::uint8_t scale(std::int64_t k0) const { return scales[static_cast<std::uint64_t>(k0) / 32]; }
  static bool exact_scale(std::uint8_t b) { return b >= 68 && b <= 252; }
  bool exact(std::int64_t k0) const { return exact_scale(scale(k0)); }
  bool all_exact() const { return std::all_of(scales, scales + m->cols / 32, exact_scale); }
  QPOLICY_AVX512_BF16 __m512i words(std::int64_t k0, std::int64_t count) const {
    const __m512i rebias = _mm512_set1_epi16(static_cast<short>((scale(k0) - 127) << 7));
    const __m512i table = _mm512_mask_add_epi16(e2m1_word_table(), 0xFEFE, e2m1_word_table(), rebias);  // not the zeros
    const __m128i packed = load_bytes16(codes + static_cast<std::uint64_t>(k0) / 2, (count + 1) / 2);
    return keep_words(_mm512_permutexvar_epi16(e2m1_indices(packed), table), count);
  }
  /// Two 32-element blocks: block 0 is bytes 0..15 of each nibble half, its table the register's first
  /// 32 bytes.
  QPOLICY_AVX512_VBMI void word_pair(std::int64_t k0, std::int64_t count, __m512i& first, __m512i& second) const {
    const __m512i offsets = _mm512_set_epi64(0x2020202020202020, 0x2020202020202020, 0, 0, 0x2020202020202020, 0x2020202020202020, 0, 0);
    const std::uint8_t second_scale = count > 32 ? scale(k0 + 32) : 0;
    const __m512i table = _mm512_inserti64x4(_mm512_castsi256_si512(bytes->at(scale(k0))), bytes->at(second_scale), 1);
    fp4_word_pair(nibble_indices(code_at(k0), (count + 1) / 2, offsets), table, first, second);
  }
  void values(std::int64_t k0, std::int64_t count, float* out) const {
    for (std::int64_t t = 0; t < count; ++t)
      out[t] = lp::weight_operand<formula::mxfp4_even>(m->codes.data(), m->block_scales.data(), m->cols, n, k0 + t);
  }
};

// NVFP4: e2m1 times an e4m3 block scale (16 elements) has at most 6 significant bits and an exponent
// of at least -10: always an exact, normal bf16.
template <>
struct formula_row<formula::nvfp4_weight> {
  static constexpr std::int64_t pair_element(std::int64_t half, std::int64_t j) { return nibble_pair_element(half, j); }
  const lp_matrix* m;
  std::int64_t n;
  const fp4_byte_tables* bytes = &nvfp4_bytes_tables();
  const std::uint8_t* codes = m->codes.data() + n * m->cols / 2;
  const std::uint8_t* row_scales = m->block_scales.data() + n * (m->cols / 16);
  const nvfp4_word_table* words_of_scale = &nvfp4_words_table();
  const std::uint8_t* code_at(std::int64_t k0) const { return codes + static_cast<std::uint64_t>(k0) / 2; }
  static bool exact(std::int64_t) { return true; }
  static bool all_exact() { return true; }
  QPOLICY_AVX512_BF16 __m512i words(std::int64_t k0, std::int64_t count) const {
    // The two blocks' sixteen values as one 32-word table (the second block's indices offset by 16).
    const std::uint8_t* scales = row_scales + static_cast<std::uint64_t>(k0) / 16;
    const __m256i first = _mm256_load_si256(reinterpret_cast<const __m256i*>(words_of_scale->words[scales[0]]));
    const __m512i table = count > 16 ? _mm512_inserti64x4(_mm512_castsi256_si512(first),
                                                          _mm256_load_si256(reinterpret_cast<const __m256i*>(words_of_scale->words[scales[1]])), 1)
                                     : _mm512_zextsi256_si512(first);
    const __m128i packed = load_bytes16(codes + static_cast<std::uint64_t>(k0) / 2, (count + 1) / 2);
    const __m512i index = _mm512_or_si512(e2m1_indices(packed), _mm512_set_epi64(0x0010001000100010, 0x0010001000100010, 0x0010001000100010,
                                                                                 0x0010001000100010, 0, 0, 0, 0));
    return keep_words(_mm512_permutexvar_epi16(index, table), count);
  }
  /// Four 16-element blocks: block b is bytes 8 b .. 8 b + 7 of each nibble half, its table at 32 b of
  /// the two registers.
  QPOLICY_AVX512_VBMI void word_pair(std::int64_t k0, std::int64_t count, __m512i& first, __m512i& second) const {
    const __m512i offsets = _mm512_set_epi64(0x6060606060606060, 0x4040404040404040, 0x2020202020202020, 0, 0x6060606060606060,
                                             0x4040404040404040, 0x2020202020202020, 0);
    const std::uint8_t* scales = row_scales + static_cast<std::uint64_t>(k0) / 16;
    const auto scale = [&](std::int64_t b) { return 16 * b < count ? scales[b] : std::uint8_t{0}; };
    const __m512i low_blocks = _mm512_inserti64x4(_mm512_castsi256_si512(bytes->at(scale(0))), bytes->at(scale(1)), 1);
    const __m512i high_blocks = _mm512_inserti64x4(_mm512_castsi256_si512(bytes->at(scale(2))), bytes->at(scale(3)), 1);
    fp4_word_pair(nibble_indices(code_at(k0), (count + 1) / 2, offsets), low_blocks, high_blocks, first, second);
  }
  void values(std::int64_t, std::int64_t, float*) const {}
};

// LUT-B (new-schemes §B.4): row n's 64 indices of a tile (3 bits each, 24 bytes at row n % 8 of the
// tile's 192), into the tile's eight e4m3 values times its E8M0 scale; taken for scale bytes 76..246 (as
// MXFP8's). K is whole tiles, so a step is half a tile row.
template <>
struct formula_row<formula::lut_b> {
  static constexpr std::int64_t pair_element(std::int64_t half, std::int64_t j) { return step_pair_element(half, j); }
  const lp_matrix* m;
  std::int64_t n;
  std::int64_t tiles = m->cols / lp::lut_cols;  // per tile row
  std::int64_t first_tile = (n / lp::lut_rows) * tiles;
  const std::uint8_t* packed = m->codes.data() + first_tile * lp::lut_packed_bytes + (n % lp::lut_rows) * (lp::lut_cols * 3 / 8);
  const e4m3_word_table* table = &e4m3_words_table();
  const mxfp8_byte_tables* bytes = &mxfp8_bytes_tables();
  std::uint8_t scale(std::int64_t k0) const { return m->block_scales[static_cast<std::size_t>(first_tile + k0 / lp::lut_cols)]; }
  static bool exact_scale(std::uint8_t b) { return b >= 76 && b <= 246; }
  bool exact(std::int64_t k0) const { return exact_scale(scale(k0)); }
  bool all_exact() const {
    const std::uint8_t* b = m->block_scales.data() + first_tile;
    return std::all_of(b, b + tiles, exact_scale);
  }
  const std::uint8_t* code_at(std::int64_t k0) const {
    return packed + (k0 / lp::lut_cols) * lp::lut_packed_bytes + (k0 % lp::lut_cols) * 3 / 8;
  }
  QPOLICY_AVX512_BF16 __m512i words(std::int64_t k0, std::int64_t) const {
    const std::int64_t tile = k0 / lp::lut_cols;
    // The tile's eight values as floats: its codebook's bf16 words, widened, times the scale (exact).
    const __m256i book = _mm256_maskz_loadu_epi8(0xFF, m->codebook.data() + (first_tile + tile) * lp::lut_entries);
    const __m512i book_words = e4m3_words<false>(book, *table, _mm512_setzero_si512());
    const __m512 values = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(book_words)), 16)),
                                        _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(scale(k0)) << 23)));
    // 32 indices from 12 bytes: each dword gets its group's 24-bit word, shifted to its index.
    const __m512i bytes = _mm512_broadcast_i32x4(_mm_maskz_loadu_epi8(0x0FFF, code_at(k0)));
    const __m512i group_bytes_low = _mm512_set_epi32(0x80050403, 0x80050403, 0x80050403, 0x80050403, 0x80050403, 0x80050403, 0x80050403,
                                                     0x80050403, 0x80020100, 0x80020100, 0x80020100, 0x80020100, 0x80020100, 0x80020100,
                                                     0x80020100, 0x80020100);
    const __m512i group_bytes_high = _mm512_set_epi32(0x800B0A09, 0x800B0A09, 0x800B0A09, 0x800B0A09, 0x800B0A09, 0x800B0A09, 0x800B0A09,
                                                      0x800B0A09, 0x80080706, 0x80080706, 0x80080706, 0x80080706, 0x80080706, 0x80080706,
                                                      0x80080706, 0x80080706);
    const __m512i shifts = _mm512_set_epi32(21, 18, 15, 12, 9, 6, 3, 0, 21, 18, 15, 12, 9, 6, 3, 0);
    const __m512i seven = _mm512_set1_epi32(7);
    const __m512i low = _mm512_and_si512(_mm512_srlv_epi32(_mm512_shuffle_epi8(bytes, group_bytes_low), shifts), seven);
    const __m512i high = _mm512_and_si512(_mm512_srlv_epi32(_mm512_shuffle_epi8(bytes, group_bytes_high), shifts), seven);
    return (__m512i)_mm512_cvtne2ps_pbh(_mm512_permutexvar_ps(high, values), _mm512_permutexvar_ps(low, values));
  }
  /// The row's whole tile row at k0 (a pair of steps: K is whole tiles): the 24 bytes of indices spread
  /// one group of eight per 64-bit lane and each index cut out by a multishift; the tile's eight values
  /// as the bytes of their bf16 words, from its scale's MXFP8 byte tables indexed by the codebook's
  /// codes broadcast to every lane (so that a byte permute by an index's low 3 bits finds its value,
  /// whatever the higher bits hold).
  QPOLICY_AVX512_VBMI void word_pair(std::int64_t k0, std::int64_t, __m512i& first, __m512i& second) const {
    const e4m3_byte_table& t = bytes->of_scale[scale(k0)];
    std::uint64_t book_codes;
    std::memcpy(&book_codes, m->codebook.data() + (first_tile + k0 / lp::lut_cols) * lp::lut_entries, sizeof book_codes);
    const __m512i book = _mm512_set1_epi64(static_cast<long long>(book_codes));
    const __m512i high_of = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(t.high[0], book, t.high[1]), book,
                                                      _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);  // high | (code & sign)
    const __m512i low_of = _mm512_permutex2var_epi8(t.low[0], book, t.low[1]);
    const __m512i groups = _mm512_set_epi64(0x1C1B1A1918171615, 0x1918171615141312, 0x161514131211100F, 0x131211100F0E0D0C,
                                            0x100F0E0D0C0B0A09, 0x0D0C0B0A09080706, 0x0A09080706050403, 0x0706050403020100);
    const __m512i spread = _mm512_permutexvar_epi8(groups, _mm512_maskz_loadu_epi8(0xFFFFFF, code_at(k0)));  // lane j: bytes 3j..
    const __m512i indices = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x15120F0C09060300), spread);  // byte b: bits 3b..
    const __m512i high = _mm512_permutexvar_epi8(indices, high_of), low = _mm512_permutexvar_epi8(indices, low_of);
    first = _mm512_unpacklo_epi8(low, high);
    second = _mm512_unpackhi_epi8(low, high);
  }
  void values(std::int64_t k0, std::int64_t count, float* out) const {
    for (std::int64_t t = 0; t < count; ++t)
      out[t] = lp::weight_operand<formula::lut_b>(m->codes.data(), m->block_scales.data(), m->cols, n, k0 + t, m->codebook.data());
  }
};

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

// INT8: the code itself (the row scale multiplies the sum).
template <>
struct formula_row<formula::int8_per_channel> {
  static constexpr std::int64_t pair_element(std::int64_t half, std::int64_t j) { return step_pair_element(half, j); }
  const lp_matrix* m;
  std::int64_t n;
  const std::uint8_t* row = m->codes.data() + n * m->cols;
  const e4m3_byte_table* bytes = &int8_bytes_table();
  const std::uint8_t* code_at(std::int64_t k0) const { return row + k0; }
  static bool exact(std::int64_t) { return true; }
  static bool all_exact() { return true; }
  QPOLICY_AVX512_BF16 __m512i words(std::int64_t k0, std::int64_t count) const {
    const __m256i codes = load_bytes32(row + k0, count);
    const __m512 low = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(codes)));
    const __m512 high = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(codes, 1)));
    return (__m512i)_mm512_cvtne2ps_pbh(high, low);
  }
  /// 64 codes: the bytes of their magnitudes' words by two-register byte permutes, the sign from the code.
  QPOLICY_AVX512_VBMI void word_pair(std::int64_t k0, std::int64_t count, __m512i& first, __m512i& second) const {
    const __m512i codes = load_bytes64(row + k0, count);
    const __m512i magnitude = _mm512_abs_epi8(codes);
    const __mmask64 nonzero = _mm512_test_epi8_mask(codes, codes);
    const __m512i high = _mm512_ternarylogic_epi32(_mm512_maskz_permutex2var_epi8(nonzero, bytes->high[0], magnitude, bytes->high[1]), codes,
                                                   _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);  // high | (code & sign)
    const __m512i low = _mm512_maskz_permutex2var_epi8(nonzero, bytes->low[0], magnitude, bytes->low[1]);
    first = _mm512_unpacklo_epi8(low, high);
    second = _mm512_unpackhi_epi8(low, high);
  }
  void values(std::int64_t, std::int64_t, float*) const {}
};

inline e4m3_row row_of(const e4m3_weights& w, std::int64_t n) { return {w.codes + n * w.k, &e4m3_words_table(), &e4m3_bytes_table()}; }
template <formula F>
formula_row<F> row_of(const formula_weights<F>& w, std::int64_t n) { return {w.matrix, n}; }
inline std::int64_t rows_of(const e4m3_weights& w) { return w.n; }
inline std::int64_t cols_of(const e4m3_weights& w) { return w.k; }
template <formula F>
std::int64_t rows_of(const formula_weights<F>& w) { return w.matrix->rows; }
template <formula F>
std::int64_t cols_of(const formula_weights<F>& w) { return w.matrix->cols; }

#pragma GCC diagnostic pop

}  // namespace qpolicy::cpu::detail::decode_rows

#endif
