#include <cuda_runtime.h>

#include "qpolicy/kernels/cuda/detail/cuda_check.hpp"
#include "qpolicy/kernels/cuda/device_info.hpp"

namespace qpolicy::cuda {

device_report query_devices() {
  device_report r;
  r.built_with_cuda = true;
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    r.description = std::string("no usable CUDA device: cudaGetDeviceCount failed: ") + cudaGetErrorString(err);
    return r;
  }
  if (n == 0) {
    r.description = "no CUDA device present";
    return r;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    r.description = "no usable CUDA device: cudaGetDeviceProperties failed";
    return r;
  }
  r.count = n;
  r.description = std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
                  std::to_string(prop.totalGlobalMem >> 30) + " GiB)";
  return r;
}

int current_sm() {
  int device = 0, major = 0, minor = 0;
  detail::check(cudaGetDevice(&device), "cudaGetDevice", {});
  detail::check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute", {});
  detail::check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute", {});
  return major * 10 + minor;
}

}  // namespace qpolicy::cuda
