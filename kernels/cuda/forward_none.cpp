// Without nvcc: the GPU forward passes report that this build has no CUDA.
#include "forward.hpp"

namespace qpolicy::cuda {

namespace {
[[noreturn]] void no_cuda() {
  throw cuda_error("qpolicy was built without CUDA (nvcc was not found at configure time): no GPU forward passes");
}
}  // namespace

device_memory::device_memory(std::size_t) { no_cuda(); }
device_memory::device_memory(device_memory&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {}
device_memory& device_memory::operator=(device_memory&&) noexcept { return *this; }
device_memory::~device_memory() = default;
void device_memory::reserve(std::size_t) { no_cuda(); }
device_memory to_device(const void*, std::size_t) { no_cuda(); }
void to_host(const device_memory&, void*, std::size_t) { no_cuda(); }
void synchronize() { no_cuda(); }
device_linear upload(const cpu::fp8_linear&) { no_cuda(); }
gemm_backend linear_forward(forward_context&, const device_linear&, const std::uint16_t*, std::int64_t, std::uint16_t*) {
  no_cuda();
}
device_moe upload(const cpu::fp8_moe&) { no_cuda(); }
moe_kernel moe_forward(forward_context&, const device_moe&, const std::uint16_t*, std::int64_t, const cpu::routing&,
                       std::uint16_t*) {
  no_cuda();
}

}  // namespace qpolicy::cuda
