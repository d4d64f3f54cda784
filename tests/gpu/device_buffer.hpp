#pragma once
// Device memory for the GPU tests and benchmarks: allocated, filled from and read back to host vectors.
#include <cuda_runtime.h>

#include <stdexcept>
#include <vector>

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

}  // namespace qpolicy::test
