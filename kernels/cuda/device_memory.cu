// Device memory and the transfers around it.
#include <cuda_runtime.h>

#include "qpolicy/kernels/cuda/detail/cuda_check.hpp"
#include "qpolicy/kernels/cuda/device_memory.hpp"

namespace qpolicy::cuda {

using detail::check;

device_memory::device_memory(std::size_t bytes) : bytes_(bytes) {
  check(cudaMalloc(&ptr_, bytes ? bytes : 1), "cudaMalloc", {});
}
device_memory::device_memory(device_memory&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}
device_memory& device_memory::operator=(device_memory&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}
device_memory::~device_memory() {
  if (ptr_) cudaFree(ptr_);
}
void device_memory::reserve(std::size_t bytes) {
  if (bytes > bytes_ || !ptr_) *this = device_memory(bytes);
}

device_memory to_device(const void* host, std::size_t bytes) {
  device_memory d(bytes);
  if (bytes) check(cudaMemcpy(d.get(), host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (to the device)", {});
  return d;
}
void to_host(const device_memory& from, void* host, std::size_t bytes) {
  if (bytes) check(cudaMemcpy(host, from.get(), bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (to the host)", {});
}
void synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", {}); }
void fill_zero(const device_memory& m) {
  if (m.size()) check(cudaMemset(m.get(), 0, m.size()), "cudaMemset", {});
}
int use_device(int id) {
  int previous = 0;
  check(cudaGetDevice(&previous), "cudaGetDevice", {});
  if (id != previous) check(cudaSetDevice(id), "cudaSetDevice", {});
  return previous;
}

}  // namespace qpolicy::cuda
