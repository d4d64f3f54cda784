#pragma once
// Internal to kernels/cpu: LUT-B's tile fit, one tile per float32 lane (lut_b_fit.cpp, portable SIMD).
#include <cstddef>
#include <cstdint>

#include "qpolicy/numerics/detail/lut_b_tile.hpp"

namespace qpolicy::cpu::detail {

/// The most tiles one call fits (the widest vector's float32 lanes).
inline constexpr int lut_fit_max_lanes = 16;

/// The floats of lut_b_fit_tiles's scratch (64-byte aligned): two lane-major copies of the tiles and
/// the indices.
inline constexpr std::size_t lut_fit_scratch_floats = 2 * 512 * lut_fit_max_lanes + 512 * lut_fit_max_lanes / 4;

/// How many tiles a call fits on the active target: its float32 lanes, at most lut_fit_max_lanes.
int lut_b_fit_lanes();

/// LUT-B tiles 0 .. count - 1 (count <= lut_b_fit_lanes()), tile j's 512 widened values row-major at
/// tiles + 512 j: tile j's packed indices at packed + 192 j, codebook at codebooks + 8 j and scale byte
/// at scales[j], the bits of lp::lut_b_tile (which the tiles a lane cannot fit take, with `scalar`).
void lut_b_fit_tiles(const float* tiles, int count, float* scratch, lp::lut_scratch& scalar, std::uint8_t* packed, std::uint8_t* codebooks,
                     std::uint8_t* scales);

}  // namespace qpolicy::cpu::detail
