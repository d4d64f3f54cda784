// Builds without nvcc: the device side of the low-precision forward passes says that CUDA is not built in.
#include <string>

#include "qpolicy/kernels/cuda/low_precision_forward.hpp"

namespace qpolicy::cuda::detail {

namespace {
[[noreturn]] void not_built() { throw cuda_error("qpolicy was built without CUDA (nvcc not found at configure time)"); }
}  // namespace

device_lp_matrices upload_matrices(const std::vector<cpu::lp_matrix>&) { not_built(); }
device_treated treat_activations(forward_context&, schemes::activation_treatment, const std::uint16_t*, std::int64_t, std::int64_t) {
  not_built();
}

}  // namespace qpolicy::cuda::detail
