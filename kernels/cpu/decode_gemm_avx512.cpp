// The decode-batch GEMM on AVX-512 BF16 (decode_gemm.hpp): each weight row's 32-element steps decoded
// into bf16 words in registers, vdpbf16ps against every row of x. The decoded words are exactly the
// formula's element values (weight_operand), so each product is exact; the sums are float32.
#include "decode_gemm.hpp"
#include "decode_rows_avx512.hpp"
#include "decode_tiles_amx.hpp"

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <optional>
#include <utility>
#include <vector>

#include "qpolicy/kernels/cpu/detail/parallel.hpp"

namespace qpolicy::cpu::detail {

// GCC 12's intrinsic headers build some results from an "undefined" register (see e4m3_avx512.hpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

using schemes::formula;
using namespace decode_rows;


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
  /// acc += part times the scales of 128-wide chunk `chunk` (weight rows n0 + r, activation rows m0 +
  /// i), and part back to zero.
  QPOLICY_AVX512_BF16 void add_chunk(const group_scales& groups, std::int64_t n0, std::int64_t m0, std::int64_t chunk) {
    for (int r = 0; r < NT; ++r) {
      const float ws = groups.w_scale[((n0 + r) / 128) * groups.chunks + chunk];
      for (int i = 0; i < MT; ++i) {
        acc[i][r] = _mm512_fmadd_ps(part[i][r], _mm512_set1_ps(groups.a_scale[(m0 + i) * groups.chunks + chunk] * ws), acc[i][r]);
        part[i][r] = _mm512_setzero_ps();
      }
    }
  }
};

/// One step of `tile`: elements [k0, k0 + count) of the NT weight rows against the MT activation rows'
/// words of this step, `xs` (row i's 32 at xs + 32 i, zero past count: packed_activations).
template <bool Checked, int MT, int NT, class Row>
QPOLICY_AVX512_BF16 __attribute__((always_inline)) inline void tile_step(const Row (&rows)[NT], const std::uint16_t* xs, std::int64_t k0,
                                                                         std::int64_t count, bool grouped, tile_sums<MT, NT>& s) {
  __m512i w[NT];
  bool exact[NT];
  for (int r = 0; r < NT; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(rows[r].code_at(k0)) + rows[r].ahead, _MM_HINT_T0);
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
      s.add_chunk(*groups, n0, m0, k0 / 128);
    }
  }
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NT; ++r)
      y[(m0 + i) * ldy + n0 + r] = Checked ? _mm512_reduce_add_ps(s.acc[i][r]) + _mm512_reduce_add_ps(s.fallback[i][r])
                                           : _mm512_reduce_add_ps(s.acc[i][r]);
}

/// tile_step over a pair of steps (elements [k0, k0 + count), count <= 64) of rows that decode pairs
/// (every block exact), against the activations' two steps at xs in the rows' pair order.
template <int MT, int NT, class Row>
QPOLICY_AVX512_VBMI __attribute__((always_inline)) inline void pair_step(const Row (&rows)[NT], const std::uint16_t* xs, std::int64_t k0,
                                                                         std::int64_t count, bool grouped, tile_sums<MT, NT>& s) {
  __m512i first[NT], second[NT];
  for (int r = 0; r < NT; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(rows[r].code_at(k0)) + rows[r].ahead, _MM_HINT_T0);
    rows[r].word_pair(k0, count, first[r], second[r]);
  }
  // Every sum's first-step product, then every sum's second: each sum's two dependent vdpbf16ps are
  // the whole tile apart. Back to back, they measured 1.7x slower at M = 8 on Zen 5 (the same sums
  // in the same order).
  for (int half = 0; half < 2; ++half)
    for (int i = 0; i < MT; ++i) {
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(xs + (half * MT + i) * step);
      for (int r = 0; r < NT; ++r) {
        __m512& target = grouped ? s.part[i][r] : s.acc[i][r];
        target = _mm512_dpbf16_ps(target, xv, (__m512bh)(half == 0 ? first[r] : second[r]));
      }
    }
}

/// pair_step over elements [kb, ke) (kb a multiple of 128, ke too or the row's end), the sums carried
/// in `s`: the activations' block `packed` holds the steps from element 0.
template <int MT, int NT, class Row>
QPOLICY_AVX512_VBMI __attribute__((always_inline)) inline void pair_range(const Row (&rows)[NT], const std::uint16_t* packed, std::int64_t kb,
                                                                          std::int64_t ke, std::int64_t n0, std::int64_t m0,
                                                                          const group_scales* groups, tile_sums<MT, NT>& s) {
  constexpr std::int64_t pair = 2 * step;
  if (!groups) {
    // Whole pairs with a constant count (the decoders' checks of a partial block fold away), then the rest.
    const std::int64_t whole = kb + (ke - kb) / pair * pair;
    for (std::int64_t k0 = kb; k0 < whole; k0 += pair) pair_step<MT, NT>(rows, packed + k0 * MT, k0, pair, false, s);
    if (whole < ke) pair_step<MT, NT>(rows, packed + whole * MT, whole, ke - whole, false, s);
  } else {
    for (std::int64_t k0 = kb; k0 < ke; k0 += 128) {  // K is whole 128-wide chunks
      for (std::int64_t t = 0; t < 128; t += pair) pair_step<MT, NT>(rows, packed + (k0 + t) * MT, k0 + t, pair, true, s);
      s.add_chunk(*groups, n0, m0, k0 / 128);
    }
  }
}

/// tile_sums_of<false> for rows that decode pairs of steps, on activations packed in their pair order.
template <int MT, int NT, class Row>
QPOLICY_AVX512_VBMI void pair_sums_of(const Row (&rows)[NT], const std::uint16_t* packed, std::int64_t k, std::int64_t n0, std::int64_t m0,
                                      const group_scales* groups, float* y, std::int64_t ldy) {
  tile_sums<MT, NT> s;
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NT; ++r) s.acc[i][r] = s.part[i][r] = _mm512_setzero_ps();
  pair_range<MT, NT>(rows, packed, 0, k, n0, m0, groups, s);
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < NT; ++r) y[(m0 + i) * ldy + n0 + r] = _mm512_reduce_add_ps(s.acc[i][r]);
}

/// The weight rows of a block that block_sums_of takes together.
inline constexpr std::int64_t block_rows = 16;

/// The elements of a K slice of block_sums_of for MT activation rows beside Row's codes: activations
/// of 64 KiB / code_bits per slice (16 KiB beside 4-bit codes, 8 KiB beside 8-bit ones), which stay in
/// L1 with the slice's codes. At M = 8 on Zen 5 (48 KiB L1), 16 KiB slices ran MXFP4 and NVFP4 1.1x as
/// fast as 8 KiB ones and INT8 0.85x as fast.
template <int MT, class Row>
inline constexpr std::int64_t slice_elements = std::max<std::int64_t>(128, 65536 / Row::code_bits / (2 * MT) / 128 * 128);

/// The weight rows block_sums_of decodes side by side for MT rows of x: four for one row (more
/// independent sums to hide vdpbf16ps's latency: 1.27x MXFP4's speed at M = 1 on Zen 5), else two
/// (the registers of eight rows' sums).
template <int MT>
inline constexpr int group_rows = MT == 1 ? 4 : 2;

/// NT consecutive rows of a block, as the array that pair_range takes.
template <class Row, int NT>
struct row_group {
  Row rows[NT];
};
template <int NT, class Row, std::size_t... R>
row_group<Row, NT> group_at(const std::array<Row, block_rows>& rows, std::int64_t first, std::index_sequence<R...>) {
  return {{rows[static_cast<std::size_t>(first) + R]...}};
}

/// pair_sums_of for 16 weight rows (groups of group_rows) in K slices: every group's sums over one
/// slice, then the next slice, the sums carried in memory between slices. A slice of MT activation
/// rows (slice_elements) stays in L1 while the groups read it; over the whole of K it would not
/// (64 KiB for 8 rows and K = 4096), and the groups' reads of it from L2 took the bandwidth that the
/// weights' stream needs (1.35x the speed at M = 8 on Zen 5). Each sum takes its products in the
/// same order.
template <int MT, class Row>
QPOLICY_AVX512_VBMI void block_sums_of(const std::array<Row, block_rows>& rows, const std::uint16_t* packed, std::int64_t k, std::int64_t n0,
                                       std::int64_t m0, const group_scales* groups, float* y, std::int64_t ldy) {
  constexpr int NT = group_rows<MT>;
  constexpr std::int64_t count = block_rows / NT;
  constexpr std::int64_t slice = slice_elements<MT, Row>;
  __m512 carried[count][MT][NT];
  for (auto& group_sums : carried)
    for (auto& row_sums : group_sums)
      for (auto& sum : row_sums) sum = _mm512_setzero_ps();
  for (std::int64_t kb = 0; kb < k; kb += slice)
    for (std::int64_t g = 0; g < count; ++g) {
      const auto group = group_at<NT>(rows, NT * g, std::make_index_sequence<NT>());
      tile_sums<MT, NT> s;
      for (int i = 0; i < MT; ++i)
        for (int r = 0; r < NT; ++r) s.acc[i][r] = carried[g][i][r], s.part[i][r] = _mm512_setzero_ps();
      pair_range<MT, NT>(group.rows, packed, kb, std::min(k, kb + slice), n0 + NT * g, m0, groups, s);
      for (int i = 0; i < MT; ++i)
        for (int r = 0; r < NT; ++r) carried[g][i][r] = s.acc[i][r];
    }
  for (std::int64_t g = 0; g < count; ++g)
    for (int i = 0; i < MT; ++i)
      for (int r = 0; r < NT; ++r) y[(m0 + i) * ldy + n0 + NT * g + r] = _mm512_reduce_add_ps(carried[g][i][r]);
}

/// Rows [m0, m0 + MT) of x (their block of packed_activations) times weight rows [n0, n0 + NT): y[m, n]
/// = the sum of the sixteen lanes. With group scales (the block-scaled FP8 GEMM), each 128-wide chunk's
/// lanes are scaled before they are added. Rows with a block that is not exact in bf16 take the loop
/// that checks every step.
template <int MT, int NT, class Row, class Blocks>
QPOLICY_AVX512_BF16 void tile(const Row (&rows)[NT], const Blocks& blocks, std::int64_t k, std::int64_t n0, std::int64_t m0,
                              const group_scales* groups, float* y, std::int64_t ldy) {
  bool exact = true;
  for (int r = 0; r < NT; ++r) exact = exact && rows[r].all_exact();
  if constexpr (decodes_step_pairs<Row>) {
    if (exact && has_byte_permutes()) return pair_sums_of<MT, NT>(rows, blocks(m0, true), k, n0, m0, groups, y, ldy);
  }
  if (exact) tile_sums_of<false, MT, NT>(rows, blocks(m0, false), k, n0, m0, groups, y, ldy);
  else tile_sums_of<true, MT, NT>(rows, blocks(m0, false), k, n0, m0, groups, y, ldy);
}

/// Rows [m0, m0 + mt) of x, mt <= 8, times NT weight rows: `tile` with its row count as a constant.
template <int NT, class Row, class Blocks>
QPOLICY_AVX512_BF16 void tile_rows(std::int64_t mt, const Row (&rows)[NT], const Blocks& packed, std::int64_t k, std::int64_t n0,
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
struct packed_activations {
  std::int64_t steps;
  scratch_vector<std::uint16_t> words;
  /// Each step's words in K order, or with an `order` each pair of steps in that order (element_of, the
  /// steps then whole pairs); zero past k. A pair's 64 words are one two-register word permute of its
  /// 64 elements (the order's indices), so that packing costs little beside the GEMM (done element by
  /// element, it took 6% of an 8 x 4096 x 14336 MXFP4 call).
  QPOLICY_AVX512_BF16 packed_activations(const std::uint16_t* x, std::int64_t m, std::int64_t k, pair_order order)
      : steps(steps_of(k, order != nullptr)), words(static_cast<std::size_t>(m * steps * step)) {
    alignas(64) std::uint16_t index[2][step];
    for (std::int64_t half = 0; half < 2; ++half)
      for (std::int64_t j = 0; j < step; ++j) index[half][j] = static_cast<std::uint16_t>(element_of(order, half, j));
    const __m512i first_index = _mm512_load_si512(index[0]), second_index = _mm512_load_si512(index[1]);
    const std::int64_t span = order ? 2 : 1;  // steps filled at a time
    for (std::int64_t m0 = 0; m0 < m; m0 += 8) {
      const std::int64_t mt = std::min<std::int64_t>(8, m - m0);
      std::uint16_t* block = words.data() + m0 * steps * step;
      for (std::int64_t t = 0; t < steps; t += span)
        for (std::int64_t i = 0; i < mt; ++i) {
          const std::uint16_t* row = x + (m0 + i) * k + t * step;
          const std::int64_t left = k - t * step;
          const __m512i low = load_words32(row, std::clamp<std::int64_t>(left, 0, step));
          if (span == 1) {
            _mm512_storeu_si512(block + (t * mt + i) * step, low);
            continue;
          }
          const __m512i high = left > step ? load_words32(row + step, std::min(left - step, step)) : _mm512_setzero_si512();
          _mm512_storeu_si512(block + (t * mt + i) * step, _mm512_permutex2var_epi16(low, first_index, high));
          _mm512_storeu_si512(block + ((t + 1) * mt + i) * step, _mm512_permutex2var_epi16(low, second_index, high));
        }
    }
  }
  /// Rows [m0, m0 + 8)'s block.
  const std::uint16_t* block(std::int64_t m0) const { return words.data() + m0 * steps * step; }
};

/// exact_bf16 sixteen lanes at a time: a float is exactly a bf16 when its low half is zero, and its
/// bf16 bits are then the high half; NaN lanes take to_bf16's quiet NaN.
QPOLICY_AVX512_BF16 bool exact_bf16_lanes(const float* x, std::int64_t count, std::uint16_t* bf16) {
  __mmask16 inexact = 0;
  std::int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512i bits = _mm512_loadu_si512(x + i);
    const __mmask16 nan = _mm512_cmp_ps_mask(_mm512_castsi512_ps(bits), _mm512_castsi512_ps(bits), _CMP_UNORD_Q);
    const __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF));
    const __mmask16 tiny = _mm512_mask_cmplt_epu32_mask(_mm512_test_epi32_mask(magnitude, magnitude), magnitude, _mm512_set1_epi32(0x21800000));  // 2^-60
    inexact = static_cast<__mmask16>(inexact | ((_mm512_test_epi32_mask(bits, _mm512_set1_epi32(0xFFFF)) | tiny) & ~nan));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(bf16 + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(bits, 16)));
    for (int j = 0; nan && j < 16; ++j)
      if (nan >> j & 1) bf16[i + j] = fp8::to_bf16(x[i + j]);
  }
  return inexact == 0 && exact_bf16_scalar(x + i, count - i, bf16 + i);
}

}  // namespace

bool exact_bf16_avx512(const float* x, std::int64_t count, std::uint16_t* bf16) {
  return exact_bf16_lanes(x, count, bf16);
}


namespace {
/// Weight rows [n0, n0 + R)'s decoders.
template <class Weights, std::size_t... R>
auto rows_from(const Weights& w, std::int64_t n0, std::index_sequence<R...>) {
  return std::array{row_of(w, n0 + static_cast<std::int64_t>(R))...};
}

/// Weight rows [n0, n0 + 16 G) on AMX tiles when all are there and exact (true), else nothing (false).
template <int G, class Weights>
bool amx_rows(const Weights& w, const decode_tiles::paired_activations& x, const group_scales* groups, float* y, std::int64_t n0) {
  const std::int64_t n = rows_of(w);
  if (n - n0 < G * decode_tiles::tile_rows) return false;
  const auto rows = rows_from(w, n0, std::make_index_sequence<G * decode_tiles::tile_rows>());
  if (!std::all_of(rows.begin(), rows.end(), [](const auto& row) { return row.all_exact(); })) return false;
  decode_tiles::tile_sums<G>(rows, x, cols_of(w), n0, groups, y, n);
  return true;
}

/// Weight rows [n0, n0 + 16) by block_sums_of, for every block of 8 rows of x, when the rows are
/// all there, decode pairs of steps and are exact (true), else nothing (false).
template <class Weights, class Blocks>
QPOLICY_AVX512_VBMI bool pair_block(const Weights& w, const Blocks& packed_block, std::int64_t m, const group_scales* groups, float* y,
                                    std::int64_t n0) {
  using row_type = decltype(row_of(w, 0));
  const std::int64_t n = rows_of(w), k = cols_of(w);
  if constexpr (!decodes_step_pairs<row_type>) {
    return false;
  } else {
    if (n - n0 < block_rows || !has_byte_permutes()) return false;
    const auto rows = rows_from(w, n0, std::make_index_sequence<block_rows>());
    if (!std::all_of(rows.begin(), rows.end(), [](const auto& row) { return row.all_exact(); })) return false;
    for (std::int64_t m0 = 0; m0 < m; m0 += 8) {
      const std::uint16_t* packed = packed_block(m0, true);
      switch (std::min<std::int64_t>(8, m - m0)) {
        case 1: block_sums_of<1>(rows, packed, k, n0, m0, groups, y, n); break;
        case 2: block_sums_of<2>(rows, packed, k, n0, m0, groups, y, n); break;
        case 3: block_sums_of<3>(rows, packed, k, n0, m0, groups, y, n); break;
        case 4: block_sums_of<4>(rows, packed, k, n0, m0, groups, y, n); break;
        case 5: block_sums_of<5>(rows, packed, k, n0, m0, groups, y, n); break;
        case 6: block_sums_of<6>(rows, packed, k, n0, m0, groups, y, n); break;
        case 7: block_sums_of<7>(rows, packed, k, n0, m0, groups, y, n); break;
        default: block_sums_of<8>(rows, packed, k, n0, m0, groups, y, n); break;
      }
    }
    return true;
  }
}
}  // namespace

/// The units of 64 weight rows a thread takes at a time: small enough that a slower core hands work
/// to the others (a 4096-row layer has 64 units), large enough that taking one costs nothing.
inline constexpr std::int64_t units_per_share = 2;

template <class Weights>
void decode_gemm_bf16(const Weights& w, const batch_activations& x, const group_scales* groups, float* y, unsigned threads) {
  constexpr std::int64_t sixteen = decode_tiles::tile_rows;
  const std::int64_t n = rows_of(w), k = cols_of(w), m = x.m;
  const bool amx = has_amx_kernels() && m >= amx_min_rows;
  const std::optional<decode_tiles::paired_activations> paired = amx ? std::optional(decode_tiles::paired_activations(x.bf16, m, k, decode_tiles::pair_order_of<decltype(row_of(w, 0))>())) : std::nullopt;
  // The vdpbf16ps layouts, each made when the first rows take it: all rows without AMX, else those of
  // a last partial tile or with a block that is not exact. Rows that decode pairs of steps and are
  // exact take the activations in their pair order.
  std::once_flag packing, pair_packing;
  std::optional<packed_activations> packed, pair_packed;
  const auto packed_block = [&](std::int64_t m0, bool pairs) {
    if (pairs) {
      std::call_once(pair_packing, [&] { pair_packed.emplace(x.bf16, m, k, pair_order_of<decltype(row_of(w, 0))>()); });
      return pair_packed->block(m0);
    }
    std::call_once(packing, [&] { packed.emplace(x.bf16, m, k, nullptr); });
    return packed->block(m0);
  };
  // Passes of four 16-row tiles on AMX where they are whole and exact, else single tiles, else pairs
  // of rows on vdpbf16ps (two weight rows share each load of x; an even pair never straddles a 128-row
  // weight block).
  const std::int64_t unit = decode_tiles::max_tiles * sixteen;
  parallel_shares((n + unit - 1) / unit, units_per_share, threads, [&](std::int64_t first, std::int64_t last) {
    std::optional<decode_tiles::tile_scope> scope;
    if (amx) scope.emplace(m);
    for (std::int64_t u = first; u < last; ++u) {
      if (amx && amx_rows<decode_tiles::max_tiles>(w, *paired, groups, y, u * unit)) continue;
      for (std::int64_t n0 = u * unit; n0 < std::min(n, (u + 1) * unit); n0 += sixteen) {
        if (amx && amx_rows<1>(w, *paired, groups, y, n0)) continue;
        if (pair_block(w, packed_block, m, groups, y, n0)) continue;
        for (std::int64_t p = n0; p < std::min(n, n0 + sixteen); p += 2)
          for (std::int64_t m0 = 0; m0 < m; m0 += 8) {
            const std::int64_t mt = std::min<std::int64_t>(8, m - m0);
            if (p + 1 >= n) {
              const decltype(row_of(w, 0)) one[1] = {row_of(w, p)};
              tile_rows<1>(mt, one, packed_block, k, p, m0, groups, y, n);
            } else {
              const decltype(row_of(w, 0)) two[2] = {row_of(w, p), row_of(w, p + 1)};
              tile_rows<2>(mt, two, packed_block, k, p, m0, groups, y, n);
            }
          }
      }
    }
  });
}

template void decode_gemm_bf16(const e4m3_weights&, const batch_activations&, const group_scales*, float*, unsigned);
const void* decode_gemm_bf16_table() {
  return decoded_formula_table([](auto tag) { return &decode_gemm_bf16<formula_weights<decltype(tag)::id>>; });
}

#pragma GCC diagnostic pop

}  // namespace qpolicy::cpu::detail

#endif
