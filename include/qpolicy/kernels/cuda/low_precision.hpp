#pragma once
// CUDA kernels of the low-precision quantizers (behind cuda::quantize<Formula>), one specialization per formula tag, over
// the same __host__ __device__ block arithmetic as the CPU fast path (numerics/low_precision_blocks.hpp),
// so codes and scales are bit-identical to the CPU reference. Plain header: no CUDA types; without
// nvcc the functions report that CUDA is not built in.
#include <cstdint>
#include <optional>

#include "qpolicy/numerics/detail/low_precision_blocks.hpp"
#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/schemes/formulas.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"

namespace qpolicy::cuda {

/// The quantizer of formula tag Formula on the device: x and every pointer of `out` are device memory
/// (block scales zero-filled by the caller when `out.swizzled`: the 128x4 padding stays 0).
/// `amax_scratch`: one device uint32 the NVFP4 weight kernel overwrites (the matrix's amax, or
/// `tensor_amax` when given: see cpu::lp_kernel).
template <class Formula>
struct lp_kernel {
  static void run(const input_view& x, const lp::outputs& out, std::uint32_t* amax_scratch, const launch_options& = {},
                  std::optional<float> tensor_amax = std::nullopt);
};

}  // namespace qpolicy::cuda
