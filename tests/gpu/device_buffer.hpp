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
#include "qpolicy/kernels/cuda/quant.hpp"

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

/// Host buffers a formula's outputs are copied back into: byte counts per part (0: the part is absent).
struct host_parts {
  std::uint8_t* codes = nullptr;
  std::size_t code_bytes = 0;
  void* scales = nullptr;
  std::size_t scale_bytes = 0;
  float* second = nullptr;
  std::size_t second_count = 0;
  std::uint8_t* codebook = nullptr;  // LUT-B's codebooks
  std::size_t codebook_bytes = 0;
};

/// Formula tag Formula run by cuda::quantize on a device copy of host input `x`, its parts copied back
/// into `out` (byte block scales zero-filled first when `o.swizzled`, as callers of cuda::quantize do).
template <class Formula>
void quantize_on_device(const qpolicy::input_view& x, const host_parts& out, const qpolicy::quantize_options& o = {}) {
  namespace cuda = qpolicy::cuda;
  const auto in = cuda::to_device(x.data, static_cast<std::size_t>(x.size()) * (x.type == qpolicy::element::f32 ? 4 : 2));
  cuda::device_memory codes(out.code_bytes), scales(out.scale_bytes), second(out.second_count * sizeof(float)),
      scratch(sizeof(std::uint32_t)), codebook(out.codebook_bytes);
  if (out.scale_bytes) cuda::fill_zero(scales);
  cuda::quantize<Formula>({in.get(), x.type, x.rows, x.cols},
                          {codes.as<std::uint8_t>(), scales.get(), out.second_count ? second.as<float>() : nullptr,
                           out.codebook_bytes ? codebook.as<std::uint8_t>() : nullptr},
                          o, scratch.as<std::uint32_t>());
  cuda::synchronize();
  cuda::to_host(codes, out.codes, out.code_bytes);
  if (out.scale_bytes) cuda::to_host(scales, out.scales, out.scale_bytes);
  if (out.second_count) cuda::to_host(second, out.second, out.second_count * sizeof(float));
  if (out.codebook_bytes) cuda::to_host(codebook, out.codebook, out.codebook_bytes);
}

}  // namespace qpolicy::test
