#include "qpolicy/kernels/cuda/device_info.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"

namespace qpolicy::cuda {

device_report query_devices() {
  return {0, "this build has no CUDA backend (configure with -Dcuda=enabled and nvcc on PATH)", false};
}

int current_sm() { throw cuda_error("qpolicy was built without CUDA (nvcc was not found at configure time): no device"); }

}  // namespace qpolicy::cuda
