#pragma once
// The tile arithmetic of the grouped FP8 GEMM (kernels/cuda/grouped_gemm.cu: every expert of a MoE
// layer in one launch), shared with the CPU test that emulates it (tests/numerics/grouped_tile_test.cpp):
// the table that maps a CTA to an expert's rows, which 16-byte chunks a stage copies, where each
// lane's mma.sync m16n8k32 fragments sit in the staged tiles, and how accumulators become outputs
// (spec §10). __host__ __device__ where the kernel uses it; no CUDA types.
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "qpolicy/numerics/gemm_desc.hpp"
#include "qpolicy/numerics/detail/warp_tile.hpp"
#include "qpolicy/numerics/numerics.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy::fp8::grouped {

/// Scaling tags the kernel is specialized on: scales applied once to the whole sum (per-tensor,
/// per-token, per-channel), or to each 128-wide K chunk (1x128 x 128x128 blocks).
struct outer_scales {};
struct block_scales {};

// The shared CTA and warp geometry (warp_tile.hpp); K advances 128 at a time (one scale block), 32 per
// mma.m16n8k32.
using warp_tile::accumulators, warp_tile::acc_index, warp_tile::m_frags, warp_tile::n_frags, warp_tile::out_col,
    warp_tile::out_row, warp_tile::threads, warp_tile::tile_m, warp_tile::tile_n, warp_tile::warps_m, warp_tile::warps_n;
inline constexpr int tile_k = 128, k_steps = tile_k / warp_tile::k_step_bytes;
/// Bytes per staged row: 16 more than a K tile, so the 32 lanes' 4-byte fragment loads hit 32 banks.
inline constexpr int smem_row = tile_k + 16;
inline constexpr int stage_bytes = (tile_m + tile_n) * smem_row;
inline constexpr int stages = 2;
inline constexpr int chunks_per_row = tile_k / 16;
inline constexpr int chunks = (tile_m + tile_n) * chunks_per_row;  // 16-byte copies per stage

/// One CTA row of work: rows [row_begin, row_end) (at most tile_m) of expert `expert`.
struct tile {
  std::int32_t expert, row_begin, row_end;
};

/// The tiles of a grouped GEMM whose expert e owns rows [offsets[e], offsets[e + 1]): one per tile_m
/// rows of each expert, none for an expert without rows. Throws std::invalid_argument when the rows
/// do not fit the kernel's 32-bit row indices or the offsets decrease.
inline std::vector<tile> make_tiles(const std::int64_t* offsets, std::int64_t experts) {
  std::vector<tile> out;
  if (offsets[experts] > INT32_MAX)
    throw std::invalid_argument("the grouped GEMM takes at most 2^31 - 1 rows, got " + std::to_string(offsets[experts]));
  for (std::int64_t e = 0; e < experts; ++e) {
    if (offsets[e + 1] < offsets[e])
      throw std::invalid_argument("expert " + std::to_string(e) + "'s rows end before they begin");
    for (std::int64_t r = offsets[e]; r < offsets[e + 1]; r += tile_m)
      out.push_back({static_cast<std::int32_t>(e), static_cast<std::int32_t>(r),
                     static_cast<std::int32_t>(r + tile_m < offsets[e + 1] ? r + tile_m : offsets[e + 1])});
  }
  return out;
}

/// Lane `lane`'s A and B fragments of mma tiles `mf` / `nf` at k step `ks` in a stage (warp_tile.hpp).
QPOLICY_HD void load_a(const std::uint8_t* stage, int wm, int mf, int ks, int lane, std::uint32_t (&a)[4]) {
  warp_tile::load_a(stage, smem_row, wm, mf, ks, lane, a);
}
QPOLICY_HD void load_b(const std::uint8_t* stage, int wn, int nf, int ks, int lane, std::uint32_t (&b)[2]) {
  warp_tile::load_b(stage, smem_row, wn, nf, ks, lane, b);
}

/// One 16-byte copy of a stage: from which operand, its row in the tile, its byte offset in the row.
struct chunk {
  bool weight;
  int row, col;
  QPOLICY_HD int smem_offset() const { return ((weight ? tile_m : 0) + row) * smem_row + col; }
};
QPOLICY_HD chunk chunk_of(int c) {
  const bool weight = c >= tile_m * chunks_per_row;
  const int local = weight ? c - tile_m * chunks_per_row : c;
  return {weight, local / chunks_per_row, 16 * (local % chunks_per_row)};
}

/// The shape, operands and scales of a grouped GEMM: out[r, n] for r in expert e's rows =
/// dq(A)[r, :] . dq(W[e])[n, :] with the scheme's scales. Device pointers in the kernel.
struct problem {
  const std::uint8_t* a;  // [rows, k], rows grouped by expert
  const std::uint8_t* w;  // [experts, n, k]
  const float* a_scale;   // per-tensor: [experts]; per-token: [rows]; 1x128 groups: row-major [rows, k / 128]
  const float* w_scale;   // expert e's scales start at e * w_step; 128x128 blocks: w_stride per block row
  std::int64_t w_step, w_stride;
  std::uint16_t* out;  // bf16 [rows, n]
  std::int64_t n, k;
  activation_quant activation;
  weight_scales weights;
};

/// Where chunk `c` of K tile `kt` comes from: byte offset into A or W, and whether it is in bounds
/// (out of bounds: the stage holds zeros, which add nothing).
struct chunk_source {
  std::int64_t offset;
  bool valid;
};
QPOLICY_HD chunk_source source_of(const chunk& c, const problem& p, const tile& t, std::int64_t n0, std::int64_t kt) {
  const std::int64_t k = kt * tile_k + c.col;
  if (!c.weight) {
    const std::int64_t r = t.row_begin + c.row;
    return {r * p.k + k, r < t.row_end && k < p.k};
  }
  const std::int64_t n = n0 + c.row;
  return {(t.expert * p.n + n) * p.k + k, n < p.n && k < p.k};
}

/// The activation scale of global row `row` (of expert `expert`) for K chunk `kb`.
QPOLICY_HD float a_scale_of(const problem& p, std::int32_t expert, std::int64_t row, std::int64_t kb) {
  switch (p.activation) {
    case activation_quant::per_tensor: return p.a_scale[expert];
    case activation_quant::per_token: return p.a_scale[row];
    default: return p.a_scale[row * (p.k / 128) + kb];
  }
}
/// The weight scale of output column `col` of expert `expert` for K chunk `kb`.
QPOLICY_HD float w_scale_of(const problem& p, std::int32_t expert, std::int64_t col, std::int64_t kb) {
  const float* s = p.w_scale + expert * p.w_step;
  switch (p.weights) {
    case weight_scales::per_tensor: return s[0];
    case weight_scales::per_channel: return s[col];
    default: return s[(col / 128) * p.w_stride + kb];
  }
}

/// Block scaling: the activation scales of a lane's rows for K chunk `kb` (zero for rows past the
/// tile's end, whose sums are zero too), indexed as fold_chunk reads them.
QPOLICY_HD void chunk_row_scales(const problem& p, const tile& t, int wm, int lane, std::int64_t kb, float (&out)[m_frags][2]) {
  QPOLICY_UNROLL
  for (int mf = 0; mf < m_frags; ++mf)
    QPOLICY_UNROLL
    for (int h = 0; h < 2; ++h) {
      const std::int64_t row = t.row_begin + out_row(wm, mf, lane, 2 * h);
      out[mf][h] = row < t.row_end ? a_scale_of(p, t.expert, row, kb) : 0.0f;
    }
}

/// Block scaling: adds a K chunk's partial sums, scaled by both scales (spec §10), to the
/// accumulators. `a_scales[mf][h]`: the scale of the lane's row c_row(lane, 2h) of mma tile row mf.
QPOLICY_HD void fold_chunk(const float (&partial)[accumulators], const float (&a_scales)[m_frags][2], float w_scale,
                      float (&acc)[accumulators]) {
  warp_tile::for_each_accumulator([&](int mf, int nf, int i) {
    const int j = acc_index(mf, nf, i);
    acc[j] += partial[j] * a_scales[mf][i >> 1] * w_scale;
  });
}

/// Writes a lane's outputs of the CTA at (t, n0) as bf16; outer scaling applies the scales here. Rows
/// past the tile's end and columns past n are skipped (n is even, so a pair is in or out together).
template <class Scaling>
QPOLICY_HD void store_outputs(const problem& p, const tile& t, std::int64_t n0, int wm, int wn, int lane,
                         const float (&acc)[accumulators]) {
  QPOLICY_UNROLL
  for (int mf = 0; mf < m_frags; ++mf)
    QPOLICY_UNROLL
    for (int h = 0; h < 2; ++h) {
      const std::int64_t row = t.row_begin + out_row(wm, mf, lane, 2 * h);
      if (row >= t.row_end) continue;
      float sa = 1.0f;
      if constexpr (!std::is_same_v<Scaling, block_scales>) sa = a_scale_of(p, t.expert, row, 0);
      QPOLICY_UNROLL
      for (int nf = 0; nf < n_frags; ++nf) {
        const std::int64_t col = n0 + out_col(wn, nf, lane, 2 * h);
        if (col >= p.n) continue;
        float v0 = acc[acc_index(mf, nf, 2 * h)], v1 = acc[acc_index(mf, nf, 2 * h + 1)];
        if constexpr (!std::is_same_v<Scaling, block_scales>) {
          v0 = v0 * sa * w_scale_of(p, t.expert, col, 0);
          v1 = v1 * sa * w_scale_of(p, t.expert, col + 1, 0);
        }
        const std::uint32_t pair = static_cast<std::uint32_t>(to_bf16(v0)) | (static_cast<std::uint32_t>(to_bf16(v1)) << 16);
#if defined(__CUDA_ARCH__)
        *reinterpret_cast<std::uint32_t*>(p.out + row * p.n + col) = pair;
#else
        std::memcpy(p.out + row * p.n + col, &pair, sizeof pair);
#endif
      }
    }
}

/// Empty when the grouped kernel takes the problem, else why not: K a multiple of 16 (16-byte copies),
/// n even (bf16 pairs), 1x128 groups only with 128x128 blocks and K a multiple of 128.
inline std::string can_implement(std::int64_t n, std::int64_t k, activation_quant a, weight_scales w) {
  if (k <= 0 || k % 16 != 0)
    return "the grouped FP8 GEMM needs K to be a positive multiple of 16 (16-byte row copies), got " + std::to_string(k);
  if (n <= 0 || n % 2 != 0) return "the grouped FP8 GEMM needs N to be positive and even (bf16 pairs), got " + std::to_string(n);
  return schemes::pairing_sentence(w, a, k);
}

}  // namespace qpolicy::fp8::grouped
