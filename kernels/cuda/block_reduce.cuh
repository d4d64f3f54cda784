#pragma once
// Block-wide reductions the CUDA kernels share. For .cu files only.
#include <cuda_runtime.h>

#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::cuda::detail {

/// Block-wide abs-max of a non-negative float per thread, NaN kept when `Propagate` (amaxT) and
/// ignored otherwise (amaxN); the result is in thread 0. Threads: the block size, a multiple of 32
/// up to 1024; every thread of the block must call it.
template <bool Propagate, int Threads>
__device__ float block_amax(float v) {
  static_assert(Threads % 32 == 0 && Threads <= 1024, "a whole number of warps");
  __shared__ float part[Threads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_down_sync(0xFFFFFFFFu, v, o);
    v = Propagate ? fp8::max_nan(v, other) : fp8::max_num(v, other);
  }
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) {
      const float other = __shfl_down_sync(0xFFFFFFFFu, v, o);
      v = Propagate ? fp8::max_nan(v, other) : fp8::max_num(v, other);
    }
  }
  return v;
}

}  // namespace qpolicy::cuda::detail
