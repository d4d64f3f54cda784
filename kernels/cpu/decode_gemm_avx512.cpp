// The decode-batch GEMM on AVX-512 BF16 (decode_gemm.hpp): each weight row's 32-element steps decoded
// into bf16 words in registers, vdpbf16ps against every row of x. The decoded words are exactly the
// formula's element values (weight_operand), so each product is exact; the sums are float32.
#include "decode_gemm.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#include <algorithm>

#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/numerics/detail/low_precision_blocks.hpp"
#include "qpolicy/numerics/numerics.hpp"

#define QPOLICY_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace qpolicy::cpu::detail {

// GCC 12's intrinsic headers build some results from an "undefined" register (see e4m3_avx512.hpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

using schemes::formula;

constexpr std::int64_t step = 32;  // elements of a weight row per vdpbf16ps

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

/// 32 e4m3 codes as bf16 words: the exponent rebiased (E + 120) for normal codes, the eight subnormal
/// magnitudes (m 2^-9) from a table, NaN for 0x7F / 0xFF; `rebias` is added to the exponent of every
/// finite nonzero value (an E8M0 scale folded in). Exact: e4m3 has 3 mantissa bits, bf16 7.
QPOLICY_AVX512_BF16 inline __m512i e4m3_words(__m256i codes, __m512i rebias) {
  const __m512i w = _mm512_cvtepu8_epi16(codes);
  const __m512i magnitude = _mm512_and_si512(w, _mm512_set1_epi16(0x7F));
  // m 2^-9 for m = 0..7: 0, 2^-9, 2^-8, 1.5 2^-8, 2^-7, 1.25 2^-7, 1.5 2^-7, 1.75 2^-7.
  const __m512i subnormals = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                              0x3C60, 0x3C40, 0x3C20, 0x3C00, 0x3BC0, 0x3B80, 0x3B00, 0);
  __m512i v = _mm512_add_epi16(_mm512_slli_epi16(magnitude, 4), _mm512_set1_epi16(0x3C00));
  v = _mm512_mask_mov_epi16(v, _mm512_cmplt_epu16_mask(magnitude, _mm512_set1_epi16(8)), _mm512_permutexvar_epi16(magnitude, subnormals));
  const __mmask32 nan = _mm512_cmpeq_epi16_mask(magnitude, _mm512_set1_epi16(0x7F));
  v = _mm512_mask_add_epi16(v, _mm512_test_epi16_mask(magnitude, magnitude) & ~nan, v, rebias);
  v = _mm512_mask_mov_epi16(v, nan, _mm512_set1_epi16(0x7FC0));
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

/// A weight row's decoder: `words(k0, count)` gives elements [k0, k0 + count) (count <= 32, a whole
/// block unless it is the row's end) as bf16 words, zero past count; `exact(k0)` says whether they are
/// the formula's values exactly, each zero or of magnitude at least 2^-60 (so that a product with an
/// activation of at least 2^-60 is a normal float, which vdpbf16ps does not flush); else
/// `values(k0, count, out)` gives them in float32 (weight_operand). e4m3 codes are at least 2^-9,
/// NVFP4's values 2^-10, INT8's 1.
struct e4m3_row {
  const std::uint8_t* codes;
  static bool exact(std::int64_t) { return true; }
  static bool all_exact() { return true; }
  QPOLICY_AVX512_BF16 __m512i words(std::int64_t k0, std::int64_t count) const {
    return e4m3_words(load_bytes32(codes + k0, count), _mm512_setzero_si512());
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
  std::uint8_t scale(std::int64_t k0) const { return scales[static_cast<std::uint64_t>(k0) / 32]; }
  static bool exact_scale(std::uint8_t b) { return b == 0 || (b >= 76 && b <= 246); }
  bool exact(std::int64_t k0) const { return exact_scale(scale(k0)); }
  bool all_exact() const { return std::all_of(scales, scales + m->cols / 32, exact_scale); }
  QPOLICY_AVX512_BF16 __m512i words(std::int64_t k0, std::int64_t count) const {
    const std::uint8_t b = scale(k0);
    if (b == 0) return _mm512_setzero_si512();
    const __m256i codes = load_bytes32(this->codes + k0, count);
    return keep_words(e4m3_words(codes, _mm512_set1_epi16(static_cast<short>((b - 127) << 7))), count);
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
  static bool exact(std::int64_t) { return true; }
  static bool all_exact() { return true; }
  QPOLICY_AVX512_BF16 __m512i words(std::int64_t k0, std::int64_t count) const {
    const std::uint8_t* scales = row_scales + static_cast<std::uint64_t>(k0) / 16;
    const __m128i packed = load_bytes16(codes + static_cast<std::uint64_t>(k0) / 2, (count + 1) / 2);
    const __m512i index = e2m1_indices(packed);
    const __m512 table = e2m1_float_table();
    const __m512 low = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(index)), table),
                                     _mm512_set1_ps(fp8::decode(scales[0])));
    const __m512 high = count > 16 ? _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(index, 1)), table),
                                                   _mm512_set1_ps(fp8::decode(scales[1])))
                                   : _mm512_setzero_ps();
    return keep_words((__m512i)_mm512_cvtne2ps_pbh(high, low), count);
  }
  void values(std::int64_t, std::int64_t, float*) const {}
};

// INT8: the code itself (the row scale multiplies the sum).
template <>
struct formula_row<formula::int8_per_channel> {
  const lp_matrix* m;
  std::int64_t n;
  const std::uint8_t* row = m->codes.data() + n * m->cols;
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

e4m3_row row_of(const e4m3_weights& w, std::int64_t n) { return {w.codes + n * w.k}; }
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

/// One step of `tile`: elements [k0, k0 + count) of the NT weight rows against rows [m0, m0 + MT) of x.
template <bool Checked, int MT, int NT, class Row>
QPOLICY_AVX512_BF16 __attribute__((always_inline)) inline void tile_step(const Row (&rows)[NT], const std::uint16_t* x, std::int64_t k,
                                                                         std::int64_t m0, std::int64_t k0, std::int64_t count, bool grouped,
                                                                         tile_sums<MT, NT>& s) {
  __m512i w[NT];
  bool exact[NT];
  for (int r = 0; r < NT; ++r) {
    exact[r] = !Checked || rows[r].exact(k0);
    w[r] = exact[r] ? rows[r].words(k0, count) : _mm512_setzero_si512();
  }
  for (int i = 0; i < MT; ++i) {
    const __m512bh xv = (__m512bh)load_words32(x + (m0 + i) * k + k0, count);
    for (int r = 0; r < NT; ++r) {
      __m512& target = grouped ? s.part[i][r] : s.acc[i][r];
      target = _mm512_dpbf16_ps(target, xv, (__m512bh)w[r]);
    }
  }
  for (int r = 0; r < NT && Checked; ++r) {
    if (exact[r]) continue;
    float rare[step];
    rows[r].values(k0, count, rare);
    for (int i = 0; i < MT; ++i) s.fallback[i][r] = fma_step(s.fallback[i][r], x + (m0 + i) * k + k0, rare, count);
  }
}

/// Rows [m0, m0 + MT) of x times weight rows [n0, n0 + NT): y[m, n] = the sum of the sixteen lanes.
/// With group scales (the block-scaled FP8 GEMM), each 128-wide chunk's lanes are scaled before they
/// are added.
template <bool Checked, int MT, int NT, class Row>
QPOLICY_AVX512_BF16 void tile_sums_of(const Row (&rows)[NT], const std::uint16_t* x, std::int64_t k, std::int64_t n0, std::int64_t m0,
                                      const group_scales* groups, float* y, std::int64_t ldy) {
  tile_sums<MT, NT> s;
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NT; ++r) s.acc[i][r] = s.part[i][r] = s.fallback[i][r] = _mm512_setzero_ps();
  if (!groups) {
    std::int64_t k0 = 0;
    for (; k0 + step <= k; k0 += step) tile_step<Checked, MT, NT>(rows, x, k, m0, k0, step, false, s);
    if (k0 < k) tile_step<Checked, MT, NT>(rows, x, k, m0, k0, k - k0, false, s);
  } else {
    for (std::int64_t k0 = 0; k0 < k; k0 += 128) {  // K is whole 128-wide chunks
      for (std::int64_t t = 0; t < 128; t += step) tile_step<Checked, MT, NT>(rows, x, k, m0, k0 + t, step, true, s);
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

/// Rows [m0, m0 + MT) of x times weight rows [n0, n0 + NT): y[m, n] = the sum of the sixteen lanes.
/// With group scales (the block-scaled FP8 GEMM), each 128-wide chunk's lanes are scaled before they
/// are added. Rows with a block that is not exact in bf16 take the loop that checks every step.
template <int MT, int NT, class Row>
QPOLICY_AVX512_BF16 void tile(const Row (&rows)[NT], const std::uint16_t* x, std::int64_t k, std::int64_t n0, std::int64_t m0,
                              const group_scales* groups, float* y, std::int64_t ldy) {
  bool exact = true;
  for (int r = 0; r < NT; ++r) exact = exact && rows[r].all_exact();
  if (exact) tile_sums_of<false, MT, NT>(rows, x, k, n0, m0, groups, y, ldy);
  else tile_sums_of<true, MT, NT>(rows, x, k, n0, m0, groups, y, ldy);
}

/// Rows [m0, m0 + mt) of x, mt <= 8, times NT weight rows: `tile` with its row count as a constant.
template <int NT, class Row>
QPOLICY_AVX512_BF16 void tile_rows(std::int64_t mt, const Row (&rows)[NT], const std::uint16_t* x, std::int64_t k, std::int64_t n0,
                                   std::int64_t m0, const group_scales* groups, float* y, std::int64_t ldy) {
  switch (mt) {
    case 1: return tile<1, NT>(rows, x, k, n0, m0, groups, y, ldy);
    case 2: return tile<2, NT>(rows, x, k, n0, m0, groups, y, ldy);
    case 3: return tile<3, NT>(rows, x, k, n0, m0, groups, y, ldy);
    case 4: return tile<4, NT>(rows, x, k, n0, m0, groups, y, ldy);
    case 5: return tile<5, NT>(rows, x, k, n0, m0, groups, y, ldy);
    case 6: return tile<6, NT>(rows, x, k, n0, m0, groups, y, ldy);
    case 7: return tile<7, NT>(rows, x, k, n0, m0, groups, y, ldy);
    default: return tile<8, NT>(rows, x, k, n0, m0, groups, y, ldy);
  }
}

}  // namespace

template <class Weights>
void decode_gemm_bf16(const Weights& w, const batch_activations& x, const group_scales* groups, float* y, unsigned threads) {
  const std::int64_t n = rows_of(w), k = cols_of(w), m = x.m;
  // Two weight rows share each load of x; with group scales, one (the partial sums need registers).
  const std::int64_t pairs = groups ? n : (n + 1) / 2;
  parallel_ranges(pairs, threads, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t p = first; p < last; ++p)
      for (std::int64_t m0 = 0; m0 < m; m0 += 8) {
        const std::int64_t mt = std::min<std::int64_t>(8, m - m0);
        if (groups || 2 * p + 1 >= n) {
          const std::int64_t row = groups ? p : 2 * p;
          const decltype(row_of(w, 0)) one[1] = {row_of(w, row)};
          tile_rows<1>(mt, one, x.bf16, k, row, m0, groups, y, n);
        } else {
          const decltype(row_of(w, 0)) two[2] = {row_of(w, 2 * p), row_of(w, 2 * p + 1)};
          tile_rows<2>(mt, two, x.bf16, k, 2 * p, m0, nullptr, y, n);
        }
      }
  });
}

template void decode_gemm_bf16(const e4m3_weights&, const batch_activations&, const group_scales*, float*, unsigned);
#define QPOLICY_DECODE_GEMM_BF16(F) \
  template void decode_gemm_bf16(const formula_weights<F>&, const batch_activations&, const group_scales*, float*, unsigned);
QPOLICY_DECODE_GEMM_BF16(formula::mxfp8_torch)
QPOLICY_DECODE_GEMM_BF16(formula::mxfp4_even)
QPOLICY_DECODE_GEMM_BF16(formula::int8_per_channel)
QPOLICY_DECODE_GEMM_BF16(formula::nvfp4_weight)
#undef QPOLICY_DECODE_GEMM_BF16

#pragma GCC diagnostic pop

}  // namespace qpolicy::cpu::detail

#else
namespace qpolicy::cpu::detail {
template <class Weights>
void decode_gemm_bf16(const Weights& w, const batch_activations& x, const group_scales* groups, float* y, unsigned threads) {
  decode_gemm_f32(w, x, groups, y, threads);  // never chosen: has_bf16_dot_kernels() is false here
}
}  // namespace qpolicy::cpu::detail
#endif
