// Without nvcc: the CUDA GEMMs report that this build has no CUDA.
#include "qpolicy/kernels/cuda/gemm.hpp"

namespace qpolicy::cuda {

namespace {
[[noreturn]] void no_cuda() {
  throw cuda_error("qpolicy was built without CUDA (nvcc was not found at configure time): no GPU GEMMs");
}
}  // namespace

struct gemm_runner::state {
  std::string reason;
};
gemm_runner::gemm_runner() { no_cuda(); }
gemm_runner::~gemm_runner() = default;
const std::string& gemm_runner::last_fallback_reason() const { return state_->reason; }
gemm_backend gemm_runner::run(const gemm_problem&, const gemm_operands&, const launch_options&, gemm_backend) { no_cuda(); }
void gemm_runner::run_bf16(const std::uint16_t*, const std::uint16_t*, std::uint16_t*, std::int64_t, std::int64_t, std::int64_t,
                           const launch_options&) {
  no_cuda();
}

}  // namespace qpolicy::cuda
