#pragma once
// The tile arithmetic of the weight-only (mixed-input) GEMMs of the low-precision schemes
// (kernels/cuda/weight_only_gemm.cu: W8A16 for MXFP8 and INT8, W4A16 for MXFP4 and NVFP4, dense and
// grouped over experts), shared with the CPU test that emulates it (tests/numerics/weight_only_tile_test.cpp):
// the staging of bf16 activations and of weights dequantized in the kernel (exact in bf16: an e4m3 or
// e2m1 code times a power of two or an e4m3 scale, or an int8 code), where each lane's mma.sync
// m16n8k16 bf16 fragments sit, and the epilogue's outer scales (spec §9). __host__ __device__; no
// CUDA types. The expert tile table is the grouped FP8 GEMM's (fp8::grouped::make_tiles).
#include <cstdint>
#include <cstring>
#include <string>

#include "qpolicy/numerics/detail/grouped_tile.hpp"
#include "qpolicy/numerics/detail/low_precision_blocks.hpp"
#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::lp::weight_only {

using fp8::grouped::tile;

// A CTA computes a 128 x 128 output tile with 8 warps in a 2 x 4 grid, each 64 x 32 outputs as 4 x 4
// mma tiles of 16 x 8; K advances 32 at a time (one MX block, two NVFP4 blocks), 16 per mma.
inline constexpr int tile_m = fp8::grouped::tile_m, tile_n = 128, tile_k = 32;
inline constexpr int warps_m = 2, warps_n = 4, threads = 32 * warps_m * warps_n;
inline constexpr int warp_m = tile_m / warps_m, warp_n = tile_n / warps_n;
inline constexpr int m_frags = warp_m / 16, n_frags = warp_n / 8, k_steps = tile_k / 16;
inline constexpr int accumulators = m_frags * n_frags * 4;  // per lane
/// bf16 elements per staged row: 8 more than a K tile, so the lanes' 4-byte fragment loads spread over banks.
inline constexpr int smem_row = tile_k + 8;
inline constexpr int stage_elements = (tile_m + tile_n) * smem_row;  // A rows, then W rows

static_assert(tile_m == 128, "the expert tile table hands out 128-row tiles");

// PTX ISA, mma.m16n8k16 with bf16 operands, lane = 4 * group + thread (thread in 0..3), each 32-bit
// register holding two consecutive k:
//  A register r: row group + 8 (r & 1), k 2 thread + 8 (r >> 1) (+0, +1);
//  B register r: column group, k 2 thread + 8 r (+0, +1);
//  accumulator i: row group + 8 (i >> 1), column 2 thread + (i & 1).
QPOLICY_HD int a_row(int lane, int reg) { return (lane >> 2) + 8 * (reg & 1); }
QPOLICY_HD int a_k(int lane, int reg) { return 2 * (lane & 3) + 8 * (reg >> 1); }
QPOLICY_HD int b_col(int lane) { return lane >> 2; }
QPOLICY_HD int b_k(int lane, int reg) { return 2 * (lane & 3) + 8 * reg; }
QPOLICY_HD int c_row(int lane, int i) { return (lane >> 2) + 8 * (i >> 1); }
QPOLICY_HD int c_col(int lane, int i) { return 2 * (lane & 3) + (i & 1); }

/// Two staged bf16 values (k, k + 1) as one register.
QPOLICY_HD std::uint32_t load_pair(const std::uint16_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 16);
}

/// Lane `lane`'s A fragment of mma tile `mf` of warp row `wm` at k step `ks`.
QPOLICY_HD void load_a(const std::uint16_t* stage, int wm, int mf, int ks, int lane, std::uint32_t (&a)[4]) {
  const std::uint16_t* base = stage + (wm * warp_m + mf * 16) * smem_row + ks * 16;
  QPOLICY_UNROLL
  for (int r = 0; r < 4; ++r) a[r] = load_pair(base + a_row(lane, r) * smem_row + a_k(lane, r));
}
/// Lane `lane`'s B fragment (W rows are B's columns) of mma tile `nf` of warp column `wn` at step `ks`.
QPOLICY_HD void load_b(const std::uint16_t* stage, int wn, int nf, int ks, int lane, std::uint32_t (&b)[2]) {
  const std::uint16_t* base = stage + (tile_m + wn * warp_n + nf * 8 + b_col(lane)) * smem_row + ks * 16;
  QPOLICY_UNROLL
  for (int r = 0; r < 2; ++r) b[r] = load_pair(base + b_k(lane, r));
}

/// Accumulator `i` of mma tile (mf, nf) in a lane's array, and where it lands in the CTA tile.
QPOLICY_HD int acc_index(int mf, int nf, int i) { return (mf * n_frags + nf) * 4 + i; }
QPOLICY_HD int out_row(int wm, int mf, int lane, int i) { return wm * warp_m + mf * 16 + c_row(lane, i); }
QPOLICY_HD int out_col(int wn, int nf, int lane, int i) { return wn * warp_n + nf * 8 + c_col(lane, i); }

/// A weight-only GEMM over experts: out[r, n] for r in expert e's rows =
/// (sum_k a[r, k] * w_e[n, k]) * a_scale[r] * w_row_scale_e[n] * tensor_scale[e], bf16 out. The weights
/// are formula F's codes and scales, expert e's at e times the steps. Device pointers in the kernel.
struct problem {
  const std::uint16_t* a;             // bf16 [rows, k], rows grouped by expert
  const std::uint8_t* codes;          // expert e: codes + e * code_step, [n, k] as the formula stores it
  const std::uint8_t* block_scales;   // expert e: + e * scale_step, [n, k / block] (null for INT8)
  const float* row_scales;            // INT8's per-row scales, expert e: + e * n (null otherwise)
  const float* tensor_scales;         // NVFP4's weight_scale_2 per expert (null otherwise)
  const float* a_scale;               // per-row activation scales (NVFP4 per-token), or null
  std::int64_t code_step, scale_step;
  std::uint16_t* out;                 // bf16 [rows, n]
  std::int64_t n, k;
  const std::uint16_t* bias = nullptr;  // bf16 [n], added after the scales (linear layers), or null
};

/// Staged A element `idx` (row idx / tile_k, k idx % tile_k) of K tile `kt`: bf16 bits, 0 out of bounds.
QPOLICY_HD std::uint16_t stage_a(const problem& p, const tile& t, std::int64_t kt, int idx) {
  const std::int64_t r = t.row_begin + idx / tile_k, k = kt * tile_k + idx % tile_k;
  return r < t.row_end && k < p.k ? p.a[r * p.k + k] : std::uint16_t{0};
}

/// Staged W element `idx` (column n0 + idx / tile_k, k idx % tile_k) of K tile `kt`, dequantized up to
/// its outer scale by formula F and converted to bf16, which is exact (schemes/formulas.hpp rows).
template <schemes::formula F>
QPOLICY_HD std::uint16_t stage_w(const problem& p, std::int32_t expert, std::int64_t n0, std::int64_t kt, int idx) {
  const std::int64_t n = n0 + idx / tile_k, k = kt * tile_k + idx % tile_k;
  if (n >= p.n || k >= p.k) return 0;
  const float v = weight_operand<F>(p.codes + expert * p.code_step, p.block_scales ? p.block_scales + expert * p.scale_step : nullptr,
                                    p.k, n, k);
  return fp8::to_bf16(v);
}

/// Where staged element `idx` of A (weight = false) or W goes in a stage.
QPOLICY_HD int stage_offset(bool weight, int idx) { return ((weight ? tile_m : 0) + idx / tile_k) * smem_row + idx % tile_k; }

/// Writes a lane's outputs of the CTA at (t, n0) as bf16 after the outer scales, in a fixed order:
/// token, row (INT8), tensor (NVFP4's scale_2), then the bias. Rows past the tile's end and columns past
/// n are skipped.
QPOLICY_HD void store_outputs(const problem& p, const tile& t, std::int64_t n0, int wm, int wn, int lane, const float (&acc)[accumulators]) {
  QPOLICY_UNROLL
  for (int mf = 0; mf < m_frags; ++mf)
    QPOLICY_UNROLL
    for (int nf = 0; nf < n_frags; ++nf)
      QPOLICY_UNROLL
      for (int i = 0; i < 4; ++i) {
        const std::int64_t row = t.row_begin + out_row(wm, mf, lane, i), col = n0 + out_col(wn, nf, lane, i);
        if (row >= t.row_end || col >= p.n) continue;
        float v = acc[acc_index(mf, nf, i)];
        if (p.a_scale) v *= p.a_scale[row];
        if (p.row_scales) v *= p.row_scales[t.expert * p.n + col];
        if (p.tensor_scales) v *= p.tensor_scales[t.expert];
        if (p.bias) v += fp8::from_bf16(p.bias[col]);
        p.out[row * p.n + col] = fp8::to_bf16(v);
      }
}

/// Empty when the kernel takes the problem, else why not: positive sizes, and K a multiple of the
/// formula's block (the weights were quantized in whole blocks).
inline std::string can_implement(const schemes::formula_row& f, std::int64_t n, std::int64_t k) {
  if (n <= 0 || k <= 0)
    return "the weight-only GEMM needs positive N and K, got N = " + std::to_string(n) + ", K = " + std::to_string(k);
  if (k % f.k_multiple != 0)
    return "the " + std::string(f.name) + " weights need K to be a multiple of " + std::to_string(f.k_multiple) + ", got " + std::to_string(k);
  return {};
}

}  // namespace qpolicy::lp::weight_only
