#pragma once
// The weight-only (mixed-input) GEMMs of the low-precision schemes on Hopper, as vLLM runs them there:
// W8A16 (MXFP8 codes with 1x32 E8M0 scales; INT8 with per-channel scales) and W4A16 (MXFP4 with 1x32
// E8M0 scales; NVFP4 with 1x16 e4m3 scales and the per-expert global scale), weights dequantized in
// the kernel, bf16 tensor-core MMA, float32 accumulation; grouped over experts with the FP8 grouped
// GEMM's tile table (a dense GEMM is one expert). The tile arithmetic is numerics/weight_only_tile.hpp,
// which the CPU suite emulates. Plain header: no CUDA types.
#include <cstdint>

#include "qpolicy/numerics/detail/weight_only_tile.hpp"
#include "qpolicy/schemes/formulas.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"

namespace qpolicy::cuda {

/// Runs the weight-only GEMM of weight formula tag Formula on `p` (device pointers), expert e owning
/// rows [offsets[e], offsets[e + 1]) (`offsets`: host memory, experts + 1 entries). Throws
/// std::invalid_argument when lp::weight_only::can_implement refuses, cuda_error for a failed call.
template <class Formula>
void weight_only_gemm(const lp::weight_only::problem& p, const std::int64_t* offsets, std::int64_t experts, const launch_options& = {});

/// The same over a device tile table (fp8::grouped::make_tiles of the experts' row offsets, uploaded
/// by the caller, as a MoE pass does for all its projections): no upload, no synchronization.
template <class Formula>
void weight_only_gemm_tiles(const lp::weight_only::problem& p, const lp::weight_only::tile* tiles, std::int64_t tile_count,
                            const launch_options& = {});

}  // namespace qpolicy::cuda
