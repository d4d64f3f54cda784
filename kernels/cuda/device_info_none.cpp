#include "device_info.hpp"

namespace qpolicy::cuda {

device_report query_devices() {
  return {0, "this build has no CUDA backend (configure with -Dcuda=enabled and nvcc on PATH)", false};
}

}  // namespace qpolicy::cuda
