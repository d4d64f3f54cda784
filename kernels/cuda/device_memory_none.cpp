// Without nvcc: device memory reports that this build has no CUDA.
#include "qpolicy/kernels/cuda/device_memory.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"

namespace qpolicy::cuda {

namespace {
[[noreturn]] void no_cuda() {
  throw cuda_error("qpolicy was built without CUDA (nvcc was not found at configure time): no device memory");
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
void fill_zero(const device_memory&) { no_cuda(); }
int use_device(int) { no_cuda(); }

}  // namespace qpolicy::cuda
