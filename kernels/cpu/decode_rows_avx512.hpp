#pragma once
// Internal to decode_gemm_avx512.cpp: the weight-row decoders of the decode-batch GEMM on AVX-512 BF16.
// A row's `words(k0, count)` gives a 32-element step as bf16 words in a register, exactly the formula's
// element values where `exact(k0)` says so: e4m3 codes (the FP8 GEMMs), MXFP8, MXFP4, NVFP4, LUT-B and
// INT8 rows, on the loads and tables of decode_tables_avx512.hpp.
#include "decode_tables_avx512.hpp"

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "qpolicy/numerics/detail/quantize_blocks.hpp"
#include "qpolicy/numerics/detail/lut_b_tile.hpp"
#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::cpu::detail::decode_rows {

// GCC 12's intrinsic headers build some results from an "undefined" register (see e4m3_avx512.hpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

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

/// How far ahead of a row's codes at k its decoder fetches (the `ahead` of each row type): the codes
/// eight rows on at the same k, between 16 KiB and 64 KiB on. The blocks of rows take K in slices, so
/// the rows eight on are read soon after, or the next block's are. 16 KiB on in the same row (the one
/// distance before) is only two rows on for 4-bit codes of K = 14336: eight rows on ran LUT-B 1.25x as
/// fast there at M = 8 on Zen 5, MXFP4 and NVFP4 1.05-1.15x at M = 1 and 8; the 8-bit rows did not move
/// beyond the noise (+-10% between runs).
constexpr std::int64_t prefetch_ahead(std::int64_t k, int code_bits) { return std::clamp<std::int64_t>(8 * k * code_bits / 8, row_prefetch_bytes, 65536); }

/// A weight row's decoder: `words(k0, count)` gives elements [k0, k0 + count) (count <= 32, a whole
/// block unless it is the row's end) as bf16 words, zero past count; `exact(k0)` says whether they are
/// the formula's values exactly, each zero or of magnitude at least 2^-60 (so that a product with an
/// activation of at least 2^-60 is a normal float, which vdpbf16ps does not flush); else
/// `values(k0, count, out)` gives them in float32 (weight_operand). e4m3 codes are at least 2^-9,
/// NVFP4's values 2^-10, INT8's 1.
/// A row with `word_pair(k0, count, first, second)` also gives 64 elements [k0, k0 + count) at a time
/// as two steps' words in step_pair_element's order (zero past count), for the AMX tiles.
struct e4m3_row {
  static constexpr int code_bits = 8;  // per element (the K slices of decode_gemm_avx512.cpp)
  static constexpr std::int64_t pair_element(std::int64_t half, std::int64_t j) { return step_pair_element(half, j); }
  const std::uint8_t* codes;
  const e4m3_word_table* table;
  const e4m3_byte_table* bytes;
  std::int64_t ahead;  // prefetch_ahead of its rows' K
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
  static constexpr int code_bits = 8;  // per element (the K slices of decode_gemm_avx512.cpp)
  static constexpr std::int64_t pair_element(std::int64_t half, std::int64_t j) { return step_pair_element(half, j); }
  const quantized_matrix* m;
  std::int64_t n;
  std::int64_t ahead = prefetch_ahead(m->cols, code_bits);
  const std::uint8_t* codes = m->codes.data() + n * m->cols;
  const std::uint8_t* scales = m->block_scales.data() + n * (m->cols / 32);
  const e4m3_word_table* table = &e4m3_words_table();
  const mxfp8_byte_tables* bytes = &mxfp8_bytes_tables();
  const e4m3_byte_table* unscaled = &e4m3_bytes_table();
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
  /// Two blocks: the e4m3 words from the unscaled table (in registers), then each block's scale
  /// exponent added to its finite nonzero words (words 0..15 of each step are block 0's elements,
  /// 16..31 block 1's). A block of scale byte 0 takes its scale's table (zeros that keep the code's
  /// sign), as does a pair's partial end. Two table permutes and no table loads, against four
  /// permutes of tables loaded from 64 KiB by scale byte: 1.4x MXFP8's speed at M = 1 on Zen 5, 1.2x at M = 8.
  QPOLICY_AVX512_VBMI void word_pair(std::int64_t k0, std::int64_t count, __m512i& first, __m512i& second) const {
    const std::uint8_t first_scale = scale(k0), second_scale = count > 32 ? scale(k0 + 32) : 0;
    const __m512i codes64 = load_bytes64(codes + k0, count);
    if (first_scale == 0 || second_scale == 0) return e4m3_word_pair(codes64, bytes->of_scale[first_scale], bytes->of_scale[second_scale], first, second);
    e4m3_word_pair(codes64, *unscaled, first, second);
    const __m512i rebias = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<short>((first_scale - 127) << 7)),
                                                   _mm512_set1_epi16(static_cast<short>((second_scale - 127) << 7)));
    first = rebias_finite_nonzero(first, rebias);
    second = rebias_finite_nonzero(second, rebias);
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
  static constexpr int code_bits = 4;  // per element (the K slices of decode_gemm_avx512.cpp)
  static constexpr std::int64_t pair_element(std::int64_t half, std::int64_t j) { return nibble_pair_element(half, j); }
  const quantized_matrix* m;
  std::int64_t n;
  std::int64_t ahead = prefetch_ahead(m->cols, code_bits);
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
  static constexpr int code_bits = 4;  // per element (the K slices of decode_gemm_avx512.cpp)
  static constexpr std::int64_t pair_element(std::int64_t half, std::int64_t j) { return nibble_pair_element(half, j); }
  const quantized_matrix* m;
  std::int64_t n;
  std::int64_t ahead = prefetch_ahead(m->cols, code_bits);
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
  static constexpr int code_bits = 3;  // per element (the K slices of decode_gemm_avx512.cpp)
  static constexpr std::int64_t pair_element(std::int64_t half, std::int64_t j) { return step_pair_element(half, j); }
  const quantized_matrix* m;
  std::int64_t n;
  std::int64_t ahead = prefetch_ahead(m->cols, code_bits);  // 8 rows: one tile row
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
  /// The 64 indices of the row's tile row at k0 in the low 3 bits of bytes 0..63 (the bits above
  /// them are the next indices'): the 24 bytes spread one group of eight per 64-bit lane, each index
  /// cut out by a multishift.
  QPOLICY_AVX512_VBMI __m512i indices_of(std::int64_t k0) const {
    const __m512i groups = _mm512_set_epi64(0x1C1B1A1918171615, 0x1918171615141312, 0x161514131211100F, 0x131211100F0E0D0C,
                                            0x100F0E0D0C0B0A09, 0x0D0C0B0A09080706, 0x0A09080706050403, 0x0706050403020100);
    const __m512i spread = _mm512_permutexvar_epi8(groups, _mm512_maskz_loadu_epi8(0xFFFFFF, code_at(k0)));  // lane j: bytes 3j..
    return _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x15120F0C09060300), spread);                   // byte b: bits 3b..
  }
  /// The row's whole tile row at k0 (a pair of steps: K is whole tiles), its indices by indices_of; the tile's eight values
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
    const __m512i indices = indices_of(k0);
    const __m512i high = _mm512_permutexvar_epi8(indices, high_of), low = _mm512_permutexvar_epi8(indices, low_of);
    first = _mm512_unpacklo_epi8(low, high);
    second = _mm512_unpackhi_epi8(low, high);
  }
  /// The row's whole tile row at k0 as float32, for the blocked GEMM's panels (where exact(k0)): the
  /// tile's eight values times its scale once, in both halves of a register, and word_pair's indices
  /// widened to dwords, of which a float permute reads the low four bits (so the bits above an index
  /// pick one of the two copies).
  QPOLICY_AVX512_VBMI void float_pair(std::int64_t k0, float* out) const {
    std::uint64_t book_codes;
    std::memcpy(&book_codes, m->codebook.data() + (first_tile + k0 / lp::lut_cols) * lp::lut_entries, sizeof book_codes);
    const __m512i book_words = e4m3_words<false>(_mm256_set1_epi64x(static_cast<long long>(book_codes)), *table, _mm512_setzero_si512());
    const __m512 values = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(book_words)), 16)),
                                        _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(scale(k0)) << 23)));
    const __m512i indices = indices_of(k0);
    // (Written out: the extracts take immediates, also where nothing is optimized.)
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm512_castsi512_si128(indices)), values));
    _mm512_storeu_ps(out + 16, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(indices, 1)), values));
    _mm512_storeu_ps(out + 32, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(indices, 2)), values));
    _mm512_storeu_ps(out + 48, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(indices, 3)), values));
  }
  void values(std::int64_t k0, std::int64_t count, float* out) const {
    for (std::int64_t t = 0; t < count; ++t)
      out[t] = lp::weight_operand<formula::lut_b>(m->codes.data(), m->block_scales.data(), m->cols, n, k0 + t, m->codebook.data());
  }
};

// INT8: the code itself (the row scale multiplies the sum).
template <>
struct formula_row<formula::int8_per_channel> {
  static constexpr int code_bits = 8;  // per element (the K slices of decode_gemm_avx512.cpp)
  static constexpr std::int64_t pair_element(std::int64_t half, std::int64_t j) { return step_pair_element(half, j); }
  const quantized_matrix* m;
  std::int64_t n;
  std::int64_t ahead = prefetch_ahead(m->cols, code_bits);
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

inline e4m3_row row_of(const e4m3_weights& w, std::int64_t n) {
  return {w.codes + n * w.k, &e4m3_words_table(), &e4m3_bytes_table(), prefetch_ahead(w.k, e4m3_row::code_bits)};
}
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
