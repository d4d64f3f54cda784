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
#include "qpolicy/numerics/detail/warp_tile.hpp"
#include "qpolicy/numerics/detail/quantize_blocks.hpp"
#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::lp::weight_only {

using fp8::grouped::tile;

// The shared CTA and warp geometry (warp_tile.hpp); K advances 32 at a time (one MX block, two NVFP4
// blocks), 16 per mma.m16n8k16.
using warp_tile::accumulators, warp_tile::acc_index, warp_tile::m_frags, warp_tile::n_frags, warp_tile::out_col,
    warp_tile::out_row, warp_tile::threads, warp_tile::tile_m, warp_tile::tile_n, warp_tile::warps_m, warp_tile::warps_n;
inline constexpr int tile_k = 32, k_steps = tile_k * 2 / warp_tile::k_step_bytes;
/// bf16 elements per staged row: 8 more than a K tile, so the lanes' 4-byte fragment loads spread over banks.
inline constexpr int smem_row = tile_k + 8;
inline constexpr int stage_elements = (tile_m + tile_n) * smem_row;  // A rows, then W rows

static_assert(tile_m == fp8::grouped::tile_m, "the expert tile table hands out tile_m-row tiles");

/// Lane `lane`'s A and B fragments of mma tiles `mf` / `nf` at k step `ks` in a stage of bf16 rows.
QPOLICY_HD void load_a(const std::uint16_t* stage, int wm, int mf, int ks, int lane, std::uint32_t (&a)[4]) {
  warp_tile::load_a(reinterpret_cast<const std::uint8_t*>(stage), smem_row * 2, wm, mf, ks, lane, a);
}
QPOLICY_HD void load_b(const std::uint16_t* stage, int wn, int nf, int ks, int lane, std::uint32_t (&b)[2]) {
  warp_tile::load_b(reinterpret_cast<const std::uint8_t*>(stage), smem_row * 2, wn, nf, ks, lane, b);
}

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
  const std::uint8_t* codebooks = nullptr;  // LUT-B's e4m3 codebooks, expert e: + e * codebook_step (null otherwise)
  std::int64_t codebook_step = 0;
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
                                    p.k, n, k, p.codebooks ? p.codebooks + expert * p.codebook_step : nullptr);
  return fp8::to_bf16(v);
}

/// Where staged element `idx` of A (weight = false) or W goes in a stage.
QPOLICY_HD int stage_offset(bool weight, int idx) { return ((weight ? tile_m : 0) + idx / tile_k) * smem_row + idx % tile_k; }

/// Writes a lane's outputs of the CTA at (t, n0) as bf16 after the outer scales, in a fixed order:
/// token, row (INT8), tensor (NVFP4's scale_2), then the bias. Rows past the tile's end and columns past
/// n are skipped.
QPOLICY_HD void store_outputs(const problem& p, const tile& t, std::int64_t n0, int wm, int wn, int lane, const float (&acc)[accumulators]) {
  warp_tile::for_each_accumulator([&](int mf, int nf, int i) {
    const std::int64_t row = t.row_begin + out_row(wm, mf, lane, i), col = n0 + out_col(wn, nf, lane, i);
    if (row >= t.row_end || col >= p.n) return;
    float v = acc[acc_index(mf, nf, i)];
    if (p.a_scale) v *= p.a_scale[row];
    if (p.row_scales) v *= p.row_scales[t.expert * p.n + col];
    if (p.tensor_scales) v *= p.tensor_scales[t.expert];
    if (p.bias) v += fp8::from_bf16(p.bias[col]);
    p.out[row * p.n + col] = fp8::to_bf16(v);
  });
}

/// Empty when the kernel takes the problem, else why not: positive sizes, and K a multiple of the
/// formula's block (the weights were quantized in whole blocks).
inline std::string can_implement(const schemes::formula_row& f, std::int64_t n, std::int64_t k) {
  if (n <= 0 || k <= 0)
    return "the weight-only GEMM needs positive N and K, got N = " + std::to_string(n) + ", K = " + std::to_string(k);
  if (!schemes::takes_shape(f, n, k))
    return "the " + std::string(f.name) + " weights cannot take N = " + std::to_string(n) + ", K = " + std::to_string(k) + ": " +
           schemes::block_message(f, k, n);
  return {};
}

}  // namespace qpolicy::lp::weight_only
