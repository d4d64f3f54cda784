#pragma once
// The grouped FP8 GEMM: every expert's GEMM of a MoE layer in one launch. A CTA takes a 128-row tile
// of one expert's rows (the tile table from fp8::grouped::make_tiles) and a 128-column slice of its
// weights, stages 128-wide K tiles through shared memory with cp.async, and multiplies them with
// mma.sync m16n8k32 e4m3 tensor-core instructions; the tile arithmetic is fp8/grouped_tile.hpp,
// which the CPU tests emulate. Summation order differs from the CPU reference (spec §10 leaves it
// open): results meet §10's bound rather than the reference's bits. Plain header: no CUDA types.
#include <cstdint>
#include <string>

#include "qpolicy/numerics/detail/grouped_tile.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"

namespace qpolicy::cuda {

/// Empty when the grouped kernel can run `p` on a device of compute capability `sm`, else why not:
/// FP8 tensor-core mma needs sm >= 89, and the shape rules of fp8::grouped::can_implement.
std::string grouped_can_implement(const fp8::grouped::problem& p, int sm);

/// Runs the grouped GEMM over `tile_count` tiles (`tiles`: device memory). Throws std::invalid_argument
/// when grouped_can_implement refuses the problem, cuda_error for a failed launch.
void grouped_gemm(const fp8::grouped::problem& p, const fp8::grouped::tile* tiles, std::int64_t tile_count,
                  const launch_options& launch = {});

}  // namespace qpolicy::cuda
