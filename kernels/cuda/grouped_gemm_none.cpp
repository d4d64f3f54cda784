// Without nvcc: the grouped GEMM reports that this build has no CUDA.
#include "qpolicy/kernels/cuda/grouped_gemm.hpp"

namespace qpolicy::cuda {

namespace {
const char* const no_cuda = "qpolicy was built without CUDA (nvcc was not found at configure time): no grouped GEMM";
}

std::string grouped_can_implement(const fp8::grouped::problem&, int) { return no_cuda; }
void grouped_gemm(const fp8::grouped::problem&, const fp8::grouped::tile*, std::int64_t, const launch_options&) {
  throw cuda_error(no_cuda);
}

}  // namespace qpolicy::cuda
