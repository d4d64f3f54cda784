#pragma once
// Device memory as one RAII type for the library, its tests and benchmarks, and the transfers around
// it. Plain header: no CUDA types (without nvcc every call reports that CUDA is not built in).
#include <cstddef>
#include <vector>

namespace qpolicy::cuda {

/// Device memory, freed with the owner.
class device_memory {
 public:
  device_memory() = default;
  explicit device_memory(std::size_t bytes);
  device_memory(device_memory&&) noexcept;
  device_memory& operator=(device_memory&&) noexcept;
  ~device_memory();
  void* get() const { return ptr_; }
  std::size_t size() const { return bytes_; }
  /// Grows to at least `bytes` (contents are not kept).
  void reserve(std::size_t bytes);
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A copy of `bytes` host bytes in new device memory.
device_memory to_device(const void* host, std::size_t bytes);
/// Copies `bytes` from device memory to the host.
void to_host(const device_memory& from, void* host, std::size_t bytes);
/// Waits for the device's work so far.
void synchronize();
/// Sets every byte of `m` to 0.
void fill_zero(const device_memory& m);
/// Makes device `id` this thread's current device (where device memory goes and kernels run), and
/// returns the one that was current.
int use_device(int id);

/// `count` elements of T in device memory, filled from and read back to host vectors.
template <class T>
struct device_array {
  device_memory memory;
  T* ptr = nullptr;
  explicit device_array(std::size_t count) : memory(sizeof(T) * count), ptr(memory.as<T>()) {}
  explicit device_array(const std::vector<T>& host) : memory(to_device(host.data(), sizeof(T) * host.size())), ptr(memory.as<T>()) {}
  std::vector<T> get(std::size_t count) const {
    std::vector<T> out(count);
    to_host(memory, out.data(), sizeof(T) * count);
    return out;
  }
};

}  // namespace qpolicy::cuda
