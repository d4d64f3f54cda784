#pragma once
// Which CUDA devices this process can use; GPU tests and --device cuda ask here before launching.
#include <string>

namespace qpolicy::cuda {

/// What the CUDA runtime reports: usable devices, or why there are none.
struct device_report {
  int count = 0;
  std::string description;  // e.g. "NVIDIA H200 (sm_90, 139 GiB)" or the reason for none
  bool built_with_cuda = false;
};

device_report query_devices();

/// The compute capability of the current device (e.g. 90); throws cuda_error without one.
int current_sm();

}  // namespace qpolicy::cuda
