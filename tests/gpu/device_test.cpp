// GPU suite entry: reports the device the CUDA backend sees, or skips (exit 77) with the reason.
#include <cstdio>

#include "qpolicy/kernels/cuda/device_info.hpp"

int main() {
  const auto r = qpolicy::cuda::query_devices();
  if (r.count == 0) {
    std::printf("SKIP: no GPU tests run: %s\n", r.description.c_str());
    return 77;
  }
  std::printf("CUDA device: %s (%d visible)\n", r.description.c_str(), r.count);
  return 0;
}
