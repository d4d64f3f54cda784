#include "qpolicy/kernels/cpu/detail/rotation.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>
#endif

#include "qpolicy/kernels/cpu/detail/e2m1_avx512.hpp"
#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/kernels/cpu/detail/row_ops.hpp"
#include "qpolicy/numerics/detail/hadamard.hpp"
#include "quantize_rows.hpp"
#include "transpose_avx512.hpp"

namespace qpolicy::cpu::detail {

hadamard_table::hadamard_table(std::int64_t n) : size(n), magnitude(n ? lp::hadamard_magnitude(n) : 0.0f) {
  if (n <= 0 || n > max_tabulated) return;
  entries.resize(static_cast<std::size_t>(n * n));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) entries[static_cast<std::size_t>(i * n + j)] = lp::hadamard_entry(i, j, magnitude);
}

namespace {

#ifdef QPOLICY_E2M1_AVX512
// Rotation and MXFP4 (EVEN or RCEIL) of bf16 rows, 16 blocks at a time, transposed: lane b of every register is
// block b, register i its element i. The signs are then the same in every lane, so each chain step is one
// fused multiply-add by +c or -c with no table load, the block amax is a maximum across registers and the
// scales of 16 blocks are computed at once. Each lane's operations are the reference's, in its order.
#define QPOLICY_AVX512BW __attribute__((target("avx512f,avx512bw")))
// GCC 12's intrinsic headers build some results from an "undefined" register, which -Wuninitialized and
// -Wmaybe-uninitialized report once inlined here: false positives.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

/// Step i of the chains of 16 output columns j: acc[j] = fma(x[i], (-1)^popcount(i & j) c_i, acc[j]), c_i the
/// first or the second magnitude (i < 16 or not) with its sign.
template <int I, int... J>
QPOLICY_AVX512BW inline void chain_step(const __m512* x, __m512 c_low, __m512 c_high, __m512* acc, std::integer_sequence<int, J...>) {
  const __m512 xi = x[I], c = I < 16 ? c_low : c_high;
  ((acc[J] = std::popcount(static_cast<unsigned>(I & J)) % 2 ? _mm512_fnmadd_ps(xi, c, acc[J]) : _mm512_fmadd_ps(xi, c, acc[J])), ...);
}
template <int... I>
QPOLICY_AVX512BW inline void chains(const __m512* x, __m512 c_low, __m512 c_high, __m512* acc, std::integer_sequence<int, I...>) {
  (chain_step<I>(x, c_low, c_high, acc, std::make_integer_sequence<int, 16>{}), ...);
}

/// Float32 values of the chains rounded to bf16 as fp8::to_bf16 rounds them, as float32. Its NaN rule
/// (quiet bit set, low half dropped) needs no case of its own here: a chain's NaN is a bf16 input's, quieted
/// by the arithmetic, or the default NaN, and either has a zero low half and the quiet bit, which the
/// rounding keeps.
QPOLICY_AVX512BW inline __m512 round_to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)));
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_add_epi32(u, bias), _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

/// Blocks [0, n) (n <= 16) of a bf16 row: codes (16 bytes a block) and E8M0 scales, EVEN or RCEIL.
QPOLICY_AVX512BW void rotated_mxfp4_group(const std::uint16_t* row, int n, float magnitude, bool rceil, std::uint8_t* codes, std::uint8_t* scales) {
  const __mmask16 lanes = static_cast<__mmask16>(n == 16 ? 0xFFFF : (1u << n) - 1);
  // The next group's 16 lines, fetched while this one is worked on.
  for (int line = 0; line < 16; ++line) _mm_prefetch(reinterpret_cast<const char*>(row + 512) + 64 * line, _MM_HINT_T0);
  // Element i of each block, widened: the blocks' 32-bit words holding elements (2p, 2p + 1), a block per
  // register transposed to a word per register (shuffles: sixteen gathers took longer than the chains).
  __m512 words[16];
  for (int b = 0; b < 16; ++b) words[b] = b < n ? _mm512_castsi512_ps(_mm512_loadu_si512(row + 32 * b)) : _mm512_setzero_ps();
  transpose16(words);
  __m512 x[32];
  for (int p = 0; p < 16; ++p) {
    const __m512i pair = _mm512_castps_si512(words[p]);
    x[2 * p] = _mm512_castsi512_ps(_mm512_slli_epi32(pair, 16));
    x[2 * p + 1] = _mm512_castsi512_ps(_mm512_and_si512(pair, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
  // Columns 0..15, then 16..31: sign (i, j + 16) is sign (i, j) flipped for i >= 16, so there the magnitude is
  // negated (not x: a NaN keeps its sign through the chain).
  const __m512 c = _mm512_set1_ps(magnitude);
  __m512 rotated[32];
#pragma GCC unroll 2  // each half's chains straight-line: 0.42x -> 0.5x of memcpy
  for (int half = 0; half < 2; ++half) {
    __m512 acc[16];
    for (auto& a : acc) a = _mm512_setzero_ps();
    chains(x, c, half ? _mm512_set1_ps(-magnitude) : c, acc, std::make_integer_sequence<int, 32>{});
    for (int j = 0; j < 16; ++j) rotated[16 * half + j] = round_to_bf16(_mm512_add_ps(acc[j], _mm512_setzero_ps()));
  }
  // The amax ignores NaN (max returns its second operand when one is NaN), as the block functions' does.
  const __m512i abs = _mm512_set1_epi32(0x7FFFFFFF);
  // Four partial maxima (no NaN is left in them, so their order does not matter): a chain of 8, not 32.
  __m512 partial[4];
  for (auto& p : partial) p = _mm512_setzero_ps();
  for (int j = 0; j < 32; ++j)
    partial[j % 4] = _mm512_max_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(rotated[j]), abs)), partial[j % 4]);
  const __m512 amax = _mm512_max_ps(_mm512_max_ps(partial[0], partial[1]), _mm512_max_ps(partial[2], partial[3]));
  const auto [b, multiplier] = rceil ? mxfp4_rceil_scales_of(amax) : mxfp4_even_scales_of(amax);
  // Codes: byte p of a block holds elements 2p (low nibble) and 2p + 1; dword k of a block bytes 4k..4k+3.
  __m512i q[4];
  for (int k = 0; k < 4; ++k) {
    q[k] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      const int j = 8 * k + 2 * p;
      const __m512i lo = e2m1_codes_avx512(_mm512_mul_ps(rotated[j], multiplier));
      const __m512i hi = e2m1_codes_avx512(_mm512_mul_ps(rotated[j + 1], multiplier));
      q[k] = _mm512_or_si512(q[k], _mm512_sllv_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(8 * p)));
    }
  }
  // Transposed back: u_k's 128-bit lane L is block 4L + k's 16 bytes; out_v holds blocks 4v..4v+3.
  const __m512i t0 = _mm512_unpacklo_epi32(q[0], q[1]), t1 = _mm512_unpackhi_epi32(q[0], q[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(q[2], q[3]), t3 = _mm512_unpackhi_epi32(q[2], q[3]);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
  const __m512i s01 = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(1, 0, 1, 0)), s23 = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i r01 = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(3, 2, 3, 2)), r23 = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m512i out[4] = {_mm512_shuffle_i32x4(s01, s23, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_i32x4(s01, s23, _MM_SHUFFLE(3, 1, 3, 1)),
                          _mm512_shuffle_i32x4(r01, r23, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_i32x4(r01, r23, _MM_SHUFFLE(3, 1, 3, 1))};
  for (int v = 0; v < 4; ++v) {
    const int bytes = std::max(0, std::min(64, (n - 4 * v) * 16));
    if (bytes) _mm512_mask_storeu_epi8(codes + 64 * v, bytes == 64 ? ~__mmask64{0} : (__mmask64{1} << bytes) - 1, out[v]);
  }
  _mm512_mask_cvtepi32_storeu_epi8(scales, lanes, b);
}
#pragma GCC diagnostic pop
#endif

}  // namespace

void rotate_row(const float* row, std::int64_t cols, const hadamard_table& h, element d, float* out) {
  const std::int64_t n = h.size;
  if (!h.entries.empty()) {
    rotate_blocks(row, cols / n, h.entries.data(), n, out);
  } else {
    for (std::int64_t b = 0; b < cols; b += n)
      for (std::int64_t j = 0; j < n; ++j) out[b + j] = lp::rotated_f32([&](std::int64_t i) { return row[b + i]; }, n, j, h.magnitude);
  }
  if (d == element::bf16) round_to_bf16(out, cols);
  else if (d == element::f16)
    for (std::int64_t j = 0; j < cols; ++j) out[j] = lp::round_to(d, out[j]);
}

bool rotated_mxfp4_bf16_row(const std::uint16_t* row, std::int64_t cols, bool rceil, std::uint8_t* codes, std::uint8_t* scales) {
#ifdef QPOLICY_E2M1_AVX512
  if (!cpu_target_covers(cpu_target::avx3)) return false;
  const float magnitude = lp::hadamard_magnitude(32);
  for (std::int64_t b = 0; b < cols / 32; b += 16)
    rotated_mxfp4_group(row + b * 32, static_cast<int>(std::min<std::int64_t>(16, cols / 32 - b)), magnitude, rceil, codes + b * 16, scales + b);
  return true;
#else
  (void)row, (void)cols, (void)rceil, (void)codes, (void)scales;
  return false;
#endif
}

void rotate_rows(const input_view& x, std::int64_t size, float* out, unsigned threads) {
  const hadamard_table h(size);
  parallel_ranges(x.rows, threads, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> row(static_cast<std::size_t>(x.cols));
    for (std::int64_t r = first; r < last; ++r) {
      widen(x, r * x.cols, x.cols, row.data());
      rotate_row(row.data(), x.cols, h, x.type, out + r * x.cols);
    }
  });
}

}  // namespace qpolicy::cpu::detail
