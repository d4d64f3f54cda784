#pragma once
// For the GPU tests and benchmarks: typed device memory (cuda::device_array: allocated, filled from and
// read back to host vectors) and the device check every GPU test starts with.
#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "qpolicy/kernels/cuda/device_info.hpp"
#include "qpolicy/kernels/cuda/device_memory.hpp"

namespace qpolicy::test {

/// `n` elements of T on the device, freed at scope exit: the library's one device-memory type.
template <class T>
using device_buffer = qpolicy::cuda::device_array<T>;

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
