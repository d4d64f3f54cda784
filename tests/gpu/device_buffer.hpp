#pragma once
// For the GPU tests and benchmarks: device memory (allocated, filled from and read back to host
// vectors) and the device check every GPU test starts with.
#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/device_info.hpp"

namespace qpolicy::test {

/// `n` elements of T on the device, freed at scope exit.
template <class T>
struct device_buffer {
  T* ptr = nullptr;
  explicit device_buffer(std::size_t n) {
    if (cudaMalloc(&ptr, sizeof(T) * (n ? n : 1)) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
  }
  explicit device_buffer(const std::vector<T>& host) : device_buffer(host.size()) {
    if (cudaMemcpy(ptr, host.data(), sizeof(T) * host.size(), cudaMemcpyHostToDevice) != cudaSuccess)
      throw std::runtime_error("cudaMemcpy to the device failed");
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { cudaFree(ptr); }
  std::vector<T> get(std::size_t n) const {
    std::vector<T> out(n);
    if (cudaMemcpy(out.data(), ptr, sizeof(T) * n, cudaMemcpyDeviceToHost) != cudaSuccess) throw std::runtime_error("cudaMemcpy failed");
    return out;
  }
};

/// Failures of a GPU test: counted, the first 30 printed.
inline int failures = 0;
inline void fail(const std::string& what) {
  if (++failures <= 30) std::printf("FAIL: %s\n", what.c_str());
}

/// Prints the device, or why there is none ("SKIP: no <what> run: ..."); false when there is none
/// (the test then exits 77, meson's "skipped").
inline bool have_device(const char* what) {
  const auto report = qpolicy::cuda::query_devices();
  if (report.count == 0) {
    std::printf("SKIP: no %s run: %s\n", what, report.description.c_str());
    return false;
  }
  std::printf("CUDA device: %s\n", report.description.c_str());
  return true;
}

}  // namespace qpolicy::test
