// The weight-only GEMM's float32 operands on AVX-512 BF16 (decode_gemm.hpp): a weight row's elements
// from the decode-batch GEMM's bf16 words (decode_rows_avx512.hpp), or in float32 from decoders that
// give them (LUT-B, whose words would be widened back), and the blocked GEMM's panels from sixteen such
// rows transposed in registers. Both are exactly the formula's element values, so these equal
// weight_operand's.
#include "decode_gemm.hpp"
#include "decode_rows_avx512.hpp"
#include "transpose_avx512.hpp"

// Each decoded formula's instantiations, on either branch below.

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>

#include <algorithm>

namespace qpolicy::cpu::detail {

// GCC 12's intrinsic headers build some results from an "undefined" register (see e4m3_avx512.hpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

using schemes::formula;
using namespace decode_rows;

namespace {
/// How far ahead in its row a panel's decode fetches codes into L1: four panels. Between two panels of
/// a row the blocked GEMM multiplies up to 512 rows, and the hardware prefetchers lose these streams
/// (at M = 256 on Zen 5 the LUT-B panels waited on three quarters of their code loads; with the fetch
/// the layer ran 1.13x as fast, MXFP8 and INT8 1.2x, MXFP4 and NVFP4 the same).
constexpr std::int64_t panel_prefetch = 4 * panel_depth;

/// Whether a row decoder gives a pair of steps as float32 (float_pair).
template <class Row>
concept decodes_float_pairs = requires(const Row& row, float* out) { row.float_pair(std::int64_t{}, out); };

/// row_values for a decoder with float_pair, k0 and count whole pairs of steps.
template <class Row>
QPOLICY_AVX512_VBMI void float_pairs(const Row& row, std::int64_t k0, std::int64_t count, float* out) {
  for (std::int64_t t = 0; t < count; t += 2 * step) {
    _mm_prefetch(reinterpret_cast<const char*>(row.code_at(k0 + t + panel_prefetch)), _MM_HINT_T0);
    if (row.exact(k0 + t)) row.float_pair(k0 + t, out + t);
    else row.values(k0 + t, 2 * step, out + t);
  }
}

template <formula F>
QPOLICY_AVX512_BF16 void row_values(const formula_weights<F>& w, std::int64_t n, std::int64_t k0, std::int64_t count, float* out) {
  const auto row = row_of(w, n);
  if constexpr (decodes_float_pairs<decltype(row)>) {
    if (k0 % (2 * step) == 0 && count % (2 * step) == 0 && has_byte_permutes()) return float_pairs(row, k0, count, out);
  }
  for (std::int64_t t = 0; t < count; t += step) {
    const std::int64_t c = std::min(step, count - t);
    _mm_prefetch(reinterpret_cast<const char*>(row.code_at(k0 + t + panel_prefetch)), _MM_HINT_T0);
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

const void* decode_panel_values_table() {
  return decoded_formula_table([](auto tag) { return &decode_panel_values<decltype(tag)::id>; });
}

#pragma GCC diagnostic pop

}  // namespace qpolicy::cpu::detail

#endif
