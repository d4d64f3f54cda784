// The decode-batch GEMM on AVX-512 BF16 (decode_gemm.hpp): each weight row's 32-element steps decoded
// into bf16 words in registers, vdpbf16ps against every row of x. The decoded words are exactly the
// formula's element values (weight_operand), so each product is exact; the sums are float32.
#include "decode_gemm.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/numerics/detail/low_precision_blocks.hpp"
#include "qpolicy/numerics/detail/lut_b_tile.hpp"
#include "qpolicy/numerics/numerics.hpp"

#define QPOLICY_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace qpolicy::cpu::detail {

// GCC 12's intrinsic headers build some results from an "undefined" register (see e4m3_avx512.hpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

using schemes::formula;

constexpr std::int64_t step = 32;            // elements of a weight row per vdpbf16ps
constexpr std::int64_t prefetch_bytes = 16384;  // how far ahead of a row's codes to fetch

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

QPOLICY_AVX512_BF16 const e4m3_word_table& e4m3_words_table() {
  static const e4m3_word_table table;
  return table;
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

QPOLICY_AVX512_BF16 const nvfp4_word_table& nvfp4_words_table() {
  static const nvfp4_word_table table;
  return table;
}

/// A weight row's decoder: `words(k0, count)` gives elements [k0, k0 + count) (count <= 32, a whole
/// block unless it is the row's end) as bf16 words, zero past count; `exact(k0)` says whether they are
/// the formula's values exactly, each zero or of magnitude at least 2^-60 (so that a product with an
/// activation of at least 2^-60 is a normal float, which vdpbf16ps does not flush); else
/// `values(k0, count, out)` gives them in float32 (weight_operand). e4m3 codes are at least 2^-9,
/// NVFP4's values 2^-10, INT8's 1.
struct e4m3_row {
  const std::uint8_t* codes;
  const e4m3_word_table* table;
  const std::uint8_t* code_at(std::int64_t k0) const { return codes + k0; }
  static bool exact(std::int64_t) { return true; }
  static bool all_exact() { return true; }
  QPOLICY_AVX512_BF16 __m512i words(std::int64_t k0, std::int64_t count) const {
    return e4m3_words<false>(load_bytes32(codes + k0, count), *table, _mm512_setzero_si512());
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
  const lp_matrix* m;
  std::int64_t n;
  const std::uint8_t* codes = m->codes.data() + n * m->cols;
  const std::uint8_t* scales = m->block_scales.data() + n * (m->cols / 32);
  const e4m3_word_table* table = &e4m3_words_table();
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
  void values(std::int64_t k0, std::int64_t count, float* out) const {
    for (std::int64_t t = 0; t < count; ++t)
      out[t] = lp::weight_operand<formula::mxfp8_torch>(m->codes.data(), m->block_scales.data(), m->cols, n, k0 + t);
  }
};

// MXFP4: the scale's exponent folded into the sixteen-word table, taken for scale bytes 68..252 (every
// nonzero value in [2^-60, 2^128)).
template <>
struct formula_row<formula::mxfp4_even> {
  const lp_matrix* m;
  std::int64_t n;
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
  void values(std::int64_t k0, std::int64_t count, float* out) const {
    for (std::int64_t t = 0; t < count; ++t)
      out[t] = lp::weight_operand<formula::mxfp4_even>(m->codes.data(), m->block_scales.data(), m->cols, n, k0 + t);
  }
};

// NVFP4: e2m1 times an e4m3 block scale (16 elements) has at most 6 significant bits and an exponent
// of at least -10: always an exact, normal bf16.
template <>
struct formula_row<formula::nvfp4_weight> {
  const lp_matrix* m;
  std::int64_t n;
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
  void values(std::int64_t, std::int64_t, float*) const {}
};

// LUT-B (new-schemes §B.4): row n's 64 indices of a tile (3 bits each, 24 bytes at row n % 8 of the
// tile's 192), into the tile's eight e4m3 values times its E8M0 scale; taken for scale bytes 76..246 (as
// MXFP8's). K is whole tiles, so a step is half a tile row.
template <>
struct formula_row<formula::lut_b> {
  const lp_matrix* m;
  std::int64_t n;
  std::int64_t tiles = m->cols / lp::lut_cols;  // per tile row
  std::int64_t first_tile = (n / lp::lut_rows) * tiles;
  const std::uint8_t* packed = m->codes.data() + first_tile * lp::lut_packed_bytes + (n % lp::lut_rows) * (lp::lut_cols * 3 / 8);
  const e4m3_word_table* table = &e4m3_words_table();
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
  void values(std::int64_t k0, std::int64_t count, float* out) const {
    for (std::int64_t t = 0; t < count; ++t)
      out[t] = lp::weight_operand<formula::lut_b>(m->codes.data(), m->block_scales.data(), m->cols, n, k0 + t, m->codebook.data());
  }
};

// INT8: the code itself (the row scale multiplies the sum).
template <>
struct formula_row<formula::int8_per_channel> {
  const lp_matrix* m;
  std::int64_t n;
  const std::uint8_t* row = m->codes.data() + n * m->cols;
  const std::uint8_t* code_at(std::int64_t k0) const { return row + k0; }
  static bool exact(std::int64_t) { return true; }
  static bool all_exact() { return true; }
  QPOLICY_AVX512_BF16 __m512i words(std::int64_t k0, std::int64_t count) const {
    const __m256i codes = load_bytes32(row + k0, count);
    const __m512 low = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(codes)));
    const __m512 high = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(codes, 1)));
    return (__m512i)_mm512_cvtne2ps_pbh(high, low);
  }
  void values(std::int64_t, std::int64_t, float*) const {}
};

e4m3_row row_of(const e4m3_weights& w, std::int64_t n) { return {w.codes + n * w.k, &e4m3_words_table()}; }
template <formula F>
formula_row<F> row_of(const formula_weights<F>& w, std::int64_t n) { return {w.matrix, n}; }
std::int64_t rows_of(const e4m3_weights& w) { return w.n; }
std::int64_t cols_of(const e4m3_weights& w) { return w.k; }
template <formula F>
std::int64_t rows_of(const formula_weights<F>& w) { return w.matrix->rows; }
template <formula F>
std::int64_t cols_of(const formula_weights<F>& w) { return w.matrix->cols; }

/// acc += x * w over one step, in float32 multiply-adds: a block whose values are not exact bf16 words.
QPOLICY_AVX512_BF16 inline __m512 fma_step(__m512 acc, const std::uint16_t* x, const float* w, std::int64_t count) {
  const __m512i words = load_words32(x, count);
  const __m512 x_low = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(words)), 16));
  const __m512 x_high = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(words, 1)), 16));
  const __mmask16 low_lanes = static_cast<__mmask16>(lanes32(std::min<std::int64_t>(count, 16)));
  const __mmask16 high_lanes = static_cast<__mmask16>(lanes32(std::max<std::int64_t>(count - 16, 0)));
  acc = _mm512_fmadd_ps(x_low, _mm512_maskz_loadu_ps(low_lanes, w), acc);
  return _mm512_fmadd_ps(x_high, _mm512_maskz_loadu_ps(high_lanes, w + 16), acc);
}

/// The running sums of a tile: acc, and with group scales the current chunk's part.
/// (`fallback`: the float32 multiply-adds of blocks that are not exact, kept out of vdpbf16ps, which
/// flushes a subnormal sum to zero.)
template <int MT, int NT>
struct tile_sums {
  __m512 acc[MT][NT], part[MT][NT], fallback[MT][NT];
};

/// One step of `tile`: elements [k0, k0 + count) of the NT weight rows against the MT activation rows'
/// words of this step, `xs` (row i's 32 at xs + 32 i, zero past count: packed_activations).
template <bool Checked, int MT, int NT, class Row>
QPOLICY_AVX512_BF16 __attribute__((always_inline)) inline void tile_step(const Row (&rows)[NT], const std::uint16_t* xs, std::int64_t k0,
                                                                         std::int64_t count, bool grouped, tile_sums<MT, NT>& s) {
  __m512i w[NT];
  bool exact[NT];
  for (int r = 0; r < NT; ++r) {
    // Several rows interleave streams, which the hardware prefetcher follows late: 16 KiB ahead measured
    // 1.6x (MXFP4) and 1.3x (FP8) the speed of no prefetch at M = 1 here, and more than 4 KiB or 8 KiB.
    _mm_prefetch(reinterpret_cast<const char*>(rows[r].code_at(k0)) + prefetch_bytes, _MM_HINT_T0);
    exact[r] = !Checked || rows[r].exact(k0);
    w[r] = exact[r] ? rows[r].words(k0, count) : _mm512_setzero_si512();
  }
  for (int i = 0; i < MT; ++i) {
    const __m512bh xv = (__m512bh)_mm512_loadu_si512(xs + i * step);
    for (int r = 0; r < NT; ++r) {
      __m512& target = grouped ? s.part[i][r] : s.acc[i][r];
      target = _mm512_dpbf16_ps(target, xv, (__m512bh)w[r]);
    }
  }
  for (int r = 0; r < NT && Checked; ++r) {
    if (exact[r]) continue;
    float rare[step];
    rows[r].values(k0, count, rare);
    for (int i = 0; i < MT; ++i) s.fallback[i][r] = fma_step(s.fallback[i][r], xs + i * step, rare, count);
  }
}

/// Rows [m0, m0 + MT) of x (packed: their block of packed_activations) times weight rows [n0, n0 + NT):
/// y[m, n] = the sum of the sixteen lanes. With group scales (the block-scaled FP8 GEMM), each 128-wide
/// chunk's lanes are scaled before they are added.
template <bool Checked, int MT, int NT, class Row>
QPOLICY_AVX512_BF16 void tile_sums_of(const Row (&rows)[NT], const std::uint16_t* packed, std::int64_t k, std::int64_t n0, std::int64_t m0,
                                      const group_scales* groups, float* y, std::int64_t ldy) {
  tile_sums<MT, NT> s;
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NT; ++r) s.acc[i][r] = s.part[i][r] = s.fallback[i][r] = _mm512_setzero_ps();
  if (!groups) {
    std::int64_t k0 = 0;
    const std::uint16_t* xs = packed;
    for (; k0 + step <= k; k0 += step, xs += MT * step) tile_step<Checked, MT, NT>(rows, xs, k0, step, false, s);
    if (k0 < k) tile_step<Checked, MT, NT>(rows, xs, k0, k - k0, false, s);
  } else {
    for (std::int64_t k0 = 0; k0 < k; k0 += 128) {  // K is whole 128-wide chunks
      for (std::int64_t t = 0; t < 128; t += step) tile_step<Checked, MT, NT>(rows, packed + (k0 + t) * MT, k0 + t, step, true, s);
      for (int r = 0; r < NT; ++r) {
        const float ws = groups->w_scale[((n0 + r) / 128) * groups->chunks + k0 / 128];
        for (int i = 0; i < MT; ++i) {
          s.acc[i][r] = _mm512_fmadd_ps(s.part[i][r], _mm512_set1_ps(groups->a_scale[(m0 + i) * groups->chunks + k0 / 128] * ws), s.acc[i][r]);
          s.part[i][r] = _mm512_setzero_ps();
        }
      }
    }
  }
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NT; ++r)
      y[(m0 + i) * ldy + n0 + r] = Checked ? _mm512_reduce_add_ps(s.acc[i][r]) + _mm512_reduce_add_ps(s.fallback[i][r])
                                           : _mm512_reduce_add_ps(s.acc[i][r]);
}

/// Rows [m0, m0 + MT) of x (their block of packed_activations) times weight rows [n0, n0 + NT): y[m, n]
/// = the sum of the sixteen lanes. With group scales (the block-scaled FP8 GEMM), each 128-wide chunk's
/// lanes are scaled before they are added. Rows with a block that is not exact in bf16 take the loop
/// that checks every step.
template <int MT, int NT, class Row>
QPOLICY_AVX512_BF16 void tile(const Row (&rows)[NT], const std::uint16_t* packed, std::int64_t k, std::int64_t n0, std::int64_t m0,
                              const group_scales* groups, float* y, std::int64_t ldy) {
  bool exact = true;
  for (int r = 0; r < NT; ++r) exact = exact && rows[r].all_exact();
  if (exact) tile_sums_of<false, MT, NT>(rows, packed, k, n0, m0, groups, y, ldy);
  else tile_sums_of<true, MT, NT>(rows, packed, k, n0, m0, groups, y, ldy);
}

/// Rows [m0, m0 + mt) of x, mt <= 8, times NT weight rows: `tile` with its row count as a constant.
template <int NT, class Row>
QPOLICY_AVX512_BF16 void tile_rows(std::int64_t mt, const Row (&rows)[NT], const std::uint16_t* packed, std::int64_t k, std::int64_t n0,
                                   std::int64_t m0, const group_scales* groups, float* y, std::int64_t ldy) {
  switch (mt) {
    case 1: return tile<1, NT>(rows, packed, k, n0, m0, groups, y, ldy);
    case 2: return tile<2, NT>(rows, packed, k, n0, m0, groups, y, ldy);
    case 3: return tile<3, NT>(rows, packed, k, n0, m0, groups, y, ldy);
    case 4: return tile<4, NT>(rows, packed, k, n0, m0, groups, y, ldy);
    case 5: return tile<5, NT>(rows, packed, k, n0, m0, groups, y, ldy);
    case 6: return tile<6, NT>(rows, packed, k, n0, m0, groups, y, ldy);
    case 7: return tile<7, NT>(rows, packed, k, n0, m0, groups, y, ldy);
    default: return tile<8, NT>(rows, packed, k, n0, m0, groups, y, ldy);
  }
}

/// x's rows in blocks of 8 (a tile's rows), each block step by step: for each 32-element step, the
/// block's rows' 32 words side by side, zero past k. A tile then reads one stream through one pointer;
/// eight row pointers did not fit in the registers beside a row decoder's (GCC spilled them).
std::vector<std::uint16_t> packed_activations(const std::uint16_t* x, std::int64_t m, std::int64_t k) {
  const std::int64_t steps = (k + step - 1) / step;
  std::vector<std::uint16_t> packed(static_cast<std::size_t>(m * steps * step));
  for (std::int64_t m0 = 0; m0 < m; m0 += 8) {
    const std::int64_t mt = std::min<std::int64_t>(8, m - m0);
    std::uint16_t* block = packed.data() + m0 * steps * step;
    for (std::int64_t t = 0; t < steps; ++t)
      for (std::int64_t i = 0; i < mt; ++i)
        std::copy_n(x + (m0 + i) * k + t * step, std::min(step, k - t * step), block + (t * mt + i) * step);
  }
  return packed;
}

/// Rows [m0, m0 + MT) of float32 x times NT float32 weight rows, in fused multiply-adds: the float32
/// baseline at decode batches, at the speed its weight bytes are read.
template <int MT, int NT>
QPOLICY_AVX512_BF16 void f32_tile(const float* const (&w)[NT], const float* x, std::int64_t k, std::int64_t n0, std::int64_t m0, float* y,
                                  std::int64_t ldy) {
  __m512 acc[MT][NT];
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NT; ++r) acc[i][r] = _mm512_setzero_ps();
  std::int64_t k0 = 0;
  for (; k0 + 16 <= k; k0 += 16) {
    __m512 wv[NT];
    for (int r = 0; r < NT; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(w[r] + k0) + prefetch_bytes, _MM_HINT_T0);
      wv[r] = _mm512_loadu_ps(w[r] + k0);
    }
    for (int i = 0; i < MT; ++i) {
      const __m512 xv = _mm512_loadu_ps(x + (m0 + i) * k + k0);
      for (int r = 0; r < NT; ++r) acc[i][r] = _mm512_fmadd_ps(xv, wv[r], acc[i][r]);
    }
  }
  if (k0 < k) {
    const __mmask16 valid = static_cast<__mmask16>(lanes32(k - k0));
    for (int i = 0; i < MT; ++i) {
      const __m512 xv = _mm512_maskz_loadu_ps(valid, x + (m0 + i) * k + k0);
      for (int r = 0; r < NT; ++r) acc[i][r] = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(valid, w[r] + k0), acc[i][r]);
    }
  }
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NT; ++r) y[(m0 + i) * ldy + n0 + r] = _mm512_reduce_add_ps(acc[i][r]);
}

template <int NT>
QPOLICY_AVX512_BF16 void f32_tile_rows(std::int64_t mt, const float* const (&w)[NT], const float* x, std::int64_t k, std::int64_t n0,
                                       std::int64_t m0, float* y, std::int64_t ldy) {
  switch (mt) {
    case 1: return f32_tile<1, NT>(w, x, k, n0, m0, y, ldy);
    case 2: return f32_tile<2, NT>(w, x, k, n0, m0, y, ldy);
    case 3: return f32_tile<3, NT>(w, x, k, n0, m0, y, ldy);
    case 4: return f32_tile<4, NT>(w, x, k, n0, m0, y, ldy);
    case 5: return f32_tile<5, NT>(w, x, k, n0, m0, y, ldy);
    case 6: return f32_tile<6, NT>(w, x, k, n0, m0, y, ldy);
    case 7: return f32_tile<7, NT>(w, x, k, n0, m0, y, ldy);
    default: return f32_tile<8, NT>(w, x, k, n0, m0, y, ldy);
  }
}

}  // namespace

void decode_gemm_f32_avx512(const f32_weights& w, const float* x, std::int64_t m, float* y, unsigned threads) {
  const std::int64_t n = w.n, k = w.k;
  parallel_ranges((n + 1) / 2, threads, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t p = first; p < last; ++p)
      for (std::int64_t m0 = 0; m0 < m; m0 += 8) {
        const std::int64_t mt = std::min<std::int64_t>(8, m - m0);
        if (2 * p + 1 >= n) {
          const float* const one[1] = {w.values + 2 * p * k};
          f32_tile_rows<1>(mt, one, x, k, 2 * p, m0, y, n);
        } else {
          const float* const two[2] = {w.values + 2 * p * k, w.values + (2 * p + 1) * k};
          f32_tile_rows<2>(mt, two, x, k, 2 * p, m0, y, n);
        }
      }
  });
}

template <class Weights>
void decode_gemm_bf16(const Weights& w, const batch_activations& x, const group_scales* groups, float* y, unsigned threads) {
  const std::int64_t n = rows_of(w), k = cols_of(w), m = x.m;
  const auto packed = packed_activations(x.bf16, m, k);
  const std::int64_t steps = (k + step - 1) / step;
  // Two weight rows share each load of x (an even pair never straddles a 128-row weight block).
  parallel_ranges((n + 1) / 2, threads, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t p = first; p < last; ++p)
      for (std::int64_t m0 = 0; m0 < m; m0 += 8) {
        const std::int64_t mt = std::min<std::int64_t>(8, m - m0);
        const std::uint16_t* block = packed.data() + m0 * steps * step;
        if (2 * p + 1 >= n) {
          const decltype(row_of(w, 0)) one[1] = {row_of(w, 2 * p)};
          tile_rows<1>(mt, one, block, k, 2 * p, m0, groups, y, n);
        } else {
          const decltype(row_of(w, 0)) two[2] = {row_of(w, 2 * p), row_of(w, 2 * p + 1)};
          tile_rows<2>(mt, two, block, k, 2 * p, m0, groups, y, n);
        }
      }
  });
}

namespace {
template <formula F>
QPOLICY_AVX512_BF16 void row_values(const formula_weights<F>& w, std::int64_t n, std::int64_t k0, std::int64_t count, float* out) {
  const auto row = row_of(w, n);
  for (std::int64_t t = 0; t < count; t += step) {
    const std::int64_t c = std::min(step, count - t);
    if (!row.exact(k0 + t)) {
      row.values(k0 + t, c, out + t);
      continue;
    }
    const __m512i words = row.words(k0 + t, c);
    const __m512 low = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(words)), 16));
    const __m512 high = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(words, 1)), 16));
    _mm512_mask_storeu_ps(out + t, static_cast<__mmask16>(lanes32(std::min<std::int64_t>(c, 16))), low);
    if (c > 16) _mm512_mask_storeu_ps(out + t + 16, static_cast<__mmask16>(lanes32(c - 16)), high);
  }
}
/// Sixteen rows of sixteen floats transposed in registers: r[i][j] becomes r[j][i].
QPOLICY_AVX512_BF16 inline void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)
    for (int h = 0; h < 2; ++h) {
      r[i + 2 * h] = _mm512_shuffle_ps(t[i + h], t[i + h + 2], _MM_SHUFFLE(1, 0, 1, 0));
      r[i + 2 * h + 1] = _mm512_shuffle_ps(t[i + h], t[i + h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    }
  for (int i = 0; i < 16; i += 8)
    for (int h = 0; h < 4; ++h) {
      t[i + h] = _mm512_shuffle_f32x4(r[i + h], r[i + h + 4], _MM_SHUFFLE(2, 0, 2, 0));
      t[i + h + 4] = _mm512_shuffle_f32x4(r[i + h], r[i + h + 4], _MM_SHUFFLE(3, 1, 3, 1));
    }
  for (int h = 0; h < 8; ++h) {
    r[h] = _mm512_shuffle_f32x4(t[h], t[h + 8], _MM_SHUFFLE(2, 0, 2, 0));
    r[h + 8] = _mm512_shuffle_f32x4(t[h], t[h + 8], _MM_SHUFFLE(3, 1, 3, 1));
  }
}

/// decode_panel for whole 16-row, 16-deep squares: rows decoded, then transposed in registers.
template <formula F>
QPOLICY_AVX512_BF16 void panel_values(const formula_weights<F>& w, std::int64_t n0, std::int64_t k0, std::int64_t depth, float* panel) {
  alignas(64) float rows[16][panel_depth];
  for (std::int64_t j0 = 0; j0 < panel_cols; j0 += 16) {
    const std::int64_t present = std::clamp<std::int64_t>(w.matrix->rows - n0 - j0, 0, 16);
    for (std::int64_t j = 0; j < 16; ++j)
      if (j < present) row_values(w, n0 + j0 + j, k0, depth, rows[j]);
      else std::fill(rows[j], rows[j] + depth, 0.0f);
    std::int64_t t0 = 0;
    for (; t0 + 16 <= depth; t0 += 16) {
      __m512 r[16];
      for (int j = 0; j < 16; ++j) r[j] = _mm512_load_ps(rows[j] + t0);
      transpose16(r);
      for (int u = 0; u < 16; ++u) _mm512_storeu_ps(panel + (t0 + u) * panel_cols + j0, r[u]);
    }
    for (; t0 < depth; ++t0)
      for (std::int64_t j = 0; j < 16; ++j) panel[t0 * panel_cols + j0 + j] = rows[j][t0];
  }
}
}  // namespace

template <formula F>
void decode_panel_values(const formula_weights<F>& w, std::int64_t n0, std::int64_t k0, std::int64_t depth, float* panel) {
  panel_values(w, n0, k0, depth, panel);
}

template <formula F>
void decode_row_values(const formula_weights<F>& w, std::int64_t n, std::int64_t k0, std::int64_t count, float* out) {
  row_values(w, n, k0, count, out);
}

template void decode_gemm_bf16(const e4m3_weights&, const batch_activations&, const group_scales*, float*, unsigned);
#define QPOLICY_DECODE_GEMM_BF16(F)                                                                                         \
  template void decode_gemm_bf16(const formula_weights<F>&, const batch_activations&, const group_scales*, float*, unsigned); \
  template void decode_row_values(const formula_weights<F>&, std::int64_t, std::int64_t, std::int64_t, float*);   \
  template void decode_panel_values(const formula_weights<F>&, std::int64_t, std::int64_t, std::int64_t, float*);
QPOLICY_DECODE_GEMM_BF16(formula::mxfp8_torch)
QPOLICY_DECODE_GEMM_BF16(formula::mxfp4_even)
QPOLICY_DECODE_GEMM_BF16(formula::int8_per_channel)
QPOLICY_DECODE_GEMM_BF16(formula::nvfp4_weight)
QPOLICY_DECODE_GEMM_BF16(formula::lut_b)
#undef QPOLICY_DECODE_GEMM_BF16

#pragma GCC diagnostic pop

}  // namespace qpolicy::cpu::detail

#else
// Not x86-64 GCC: has_bf16_dot_kernels() is false, so none of these is called; they link.
namespace qpolicy::cpu::detail {
template <class Weights>
void decode_gemm_bf16(const Weights& w, const batch_activations& x, const group_scales* groups, float* y, unsigned threads) {
  decode_gemm_f32(w, x, groups, y, threads);
}
void decode_gemm_f32_avx512(const f32_weights& w, const float* x, std::int64_t m, float* y, unsigned threads) {
  decode_gemm_f32(w, {x, nullptr, m}, nullptr, y, threads);
}
template <schemes::formula F>
void decode_row_values(const formula_weights<F>& w, std::int64_t n, std::int64_t k0, std::int64_t count, float* out) {
  for (std::int64_t t = 0; t < count; ++t)
    out[t] = lp::weight_operand<F>(w.matrix->codes.data(), w.matrix->block_scales.data(), w.matrix->cols, n, k0 + t);
}
template <schemes::formula F>
void decode_panel_values(const formula_weights<F>& w, std::int64_t n0, std::int64_t k0, std::int64_t depth, float* panel) {
  decode_panel(w, n0, k0, depth, panel);
}
template void decode_gemm_bf16(const e4m3_weights&, const batch_activations&, const group_scales*, float*, unsigned);
#define QPOLICY_DECODE_GEMM_BF16(F)                                                                                         \
  template void decode_gemm_bf16(const formula_weights<F>&, const batch_activations&, const group_scales*, float*, unsigned); \
  template void decode_row_values(const formula_weights<F>&, std::int64_t, std::int64_t, std::int64_t, float*);   \
  template void decode_panel_values(const formula_weights<F>&, std::int64_t, std::int64_t, std::int64_t, float*);
QPOLICY_DECODE_GEMM_BF16(schemes::formula::mxfp8_torch)
QPOLICY_DECODE_GEMM_BF16(schemes::formula::mxfp4_even)
QPOLICY_DECODE_GEMM_BF16(schemes::formula::int8_per_channel)
QPOLICY_DECODE_GEMM_BF16(schemes::formula::nvfp4_weight)
QPOLICY_DECODE_GEMM_BF16(schemes::formula::lut_b)
#undef QPOLICY_DECODE_GEMM_BF16
}  // namespace qpolicy::cpu::detail
#endif
