#pragma once
// The CTA and warp geometry both tensor-core GEMMs share -- the grouped FP8 GEMM (grouped_tile.hpp) and
// the weight-only GEMM (weight_only_tile.hpp): a CTA computes a 128 x 128 output tile with 8 warps in a
// 2 x 4 grid, each 64 x 32 outputs as 4 x 4 mma tiles of 16 x 8. Where each lane's mma.sync fragments
// sit is given in bytes along K: mma.m16n8k32 (e4m3) and mma.m16n8k16 (bf16) both hold four bytes of
// consecutive k in each 32-bit register, so one layout serves both. __host__ __device__; no CUDA types.
#include <cstdint>
#include <cstring>

#include "qpolicy/numerics/numerics.hpp"

// Accumulators must stay in registers: the device compiler unrolls every loop that indexes them.
#if defined(__CUDA_ARCH__)
#define QPOLICY_UNROLL _Pragma("unroll")
#else
#define QPOLICY_UNROLL
#endif

namespace qpolicy::warp_tile {

inline constexpr int tile_m = 128, tile_n = 128;
inline constexpr int warps_m = 2, warps_n = 4, threads = 32 * warps_m * warps_n;
inline constexpr int warp_m = tile_m / warps_m, warp_n = tile_n / warps_n;
inline constexpr int m_frags = warp_m / 16, n_frags = warp_n / 8;
inline constexpr int accumulators = m_frags * n_frags * 4;  // per lane
inline constexpr int k_step_bytes = 32;                     // K bytes per mma: 32 e4m3 or 16 bf16 values

// PTX ISA, lane = 4 * group + thread (thread in 0..3), each register holding 4 bytes of consecutive k:
//  A register r: row group + 8 (r & 1), k bytes 4 thread + 16 (r >> 1);
//  B register r: column group, k bytes 4 thread + 16 r;
//  accumulator i: row group + 8 (i >> 1), column 2 thread + (i & 1).
// Only the pairing of A's and B's k matters for the sum; rows and columns place the results.
QPOLICY_HD int a_row(int lane, int reg) { return (lane >> 2) + 8 * (reg & 1); }
QPOLICY_HD int a_k_byte(int lane, int reg) { return 4 * (lane & 3) + 16 * (reg >> 1); }
QPOLICY_HD int b_col(int lane) { return lane >> 2; }
QPOLICY_HD int b_k_byte(int lane, int reg) { return 4 * (lane & 3) + 16 * reg; }
QPOLICY_HD int c_row(int lane, int i) { return (lane >> 2) + 8 * (i >> 1); }
QPOLICY_HD int c_col(int lane, int i) { return 2 * (lane & 3) + (i & 1); }

/// Four staged bytes as one register (little-endian, as the device reads them).
QPOLICY_HD std::uint32_t load_word(const std::uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const std::uint32_t*>(p);
#else
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}

/// Lane `lane`'s A fragment of mma tile `mf` of warp row `wm` at k step `ks`, from a stage of
/// `row_bytes`-byte rows holding the tile's A rows first.
QPOLICY_HD void load_a(const std::uint8_t* stage, int row_bytes, int wm, int mf, int ks, int lane, std::uint32_t (&a)[4]) {
  const std::uint8_t* base = stage + (wm * warp_m + mf * 16) * row_bytes + ks * k_step_bytes;
  QPOLICY_UNROLL
  for (int r = 0; r < 4; ++r) a[r] = load_word(base + a_row(lane, r) * row_bytes + a_k_byte(lane, r));
}
/// Lane `lane`'s B fragment (W rows, after the tile_m A rows, are B's columns) of mma tile `nf` of warp
/// column `wn` at k step `ks`.
QPOLICY_HD void load_b(const std::uint8_t* stage, int row_bytes, int wn, int nf, int ks, int lane, std::uint32_t (&b)[2]) {
  const std::uint8_t* base = stage + (tile_m + wn * warp_n + nf * 8 + b_col(lane)) * row_bytes + ks * k_step_bytes;
  QPOLICY_UNROLL
  for (int r = 0; r < 2; ++r) b[r] = load_word(base + b_k_byte(lane, r));
}

/// Accumulator `i` of mma tile (mf, nf) in a lane's array, and where it lands in the CTA tile.
QPOLICY_HD int acc_index(int mf, int nf, int i) { return (mf * n_frags + nf) * 4 + i; }
QPOLICY_HD int out_row(int wm, int mf, int lane, int i) { return wm * warp_m + mf * 16 + c_row(lane, i); }
QPOLICY_HD int out_col(int wn, int nf, int lane, int i) { return wn * warp_n + nf * 8 + c_col(lane, i); }

/// Calls fn(mf, nf, i) for each accumulator of a lane: mma tile (mf, nf), element i (unrolled).
template <class Fn>
QPOLICY_HD void for_each_accumulator(Fn&& fn) {
  QPOLICY_UNROLL
  for (int mf = 0; mf < m_frags; ++mf)
    QPOLICY_UNROLL
    for (int nf = 0; nf < n_frags; ++nf)
      QPOLICY_UNROLL
      for (int i = 0; i < 4; ++i) fn(mf, nf, i);
}

}  // namespace qpolicy::warp_tile
