#pragma once
// For the .cu files only: CUDA errors as cuda_error naming the call and the layer, and the stream of
// a launch.
#include <cuda_runtime.h>

#include <string>

#include "qpolicy/kernels/cuda/quant.hpp"

namespace qpolicy::cuda::detail {

inline void check(cudaError_t err, const char* call, const launch_options& o) {
  if (err != cudaSuccess)
    throw cuda_error(std::string(call) + " failed" + (o.layer.empty() ? std::string() : " for layer " + o.layer) + ": " +
                     cudaGetErrorString(err));
}
inline void check_launch(const char* kernel, const launch_options& o) { check(cudaGetLastError(), kernel, o); }
inline cudaStream_t stream_of(const launch_options& o) { return static_cast<cudaStream_t>(o.stream); }

}  // namespace qpolicy::cuda::detail
