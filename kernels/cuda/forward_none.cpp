// Without nvcc: the GPU forward passes report that this build has no CUDA.
#include "qpolicy/kernels/cuda/forward.hpp"

namespace qpolicy::cuda::detail {

namespace {
[[noreturn]] void no_cuda() {
  throw cuda_error("qpolicy was built without CUDA (nvcc was not found at configure time): no GPU forward passes");
}
}  // namespace

std::int64_t upload_linear(const std::vector<std::uint8_t>&, const std::vector<float>&, const std::vector<float>&, bool,
                           std::int64_t, std::int64_t, device_memory&, device_memory&, device_memory&) {
  no_cuda();
}
void upload_experts(const std::vector<std::uint8_t>&, const std::vector<std::uint8_t>&, const std::vector<float>&,
                    const std::vector<float>&, bool, device_experts&) {
  no_cuda();
}
void moe_pipeline(forward_context&, const moe_dims&, const std::uint16_t*, std::int64_t, const cpu::routing&, std::uint16_t*,
                  const moe_projection&) {
  no_cuda();
}
moe_kernel moe_forward(forward_context&, const device_experts&, fp8::weight_scales, fp8::activation_quant,
                       const activation_quantizer&, const std::uint16_t*, std::int64_t, const cpu::routing&, std::uint16_t*) {
  no_cuda();
}

}  // namespace qpolicy::cuda::detail
