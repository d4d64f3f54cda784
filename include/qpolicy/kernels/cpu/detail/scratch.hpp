#pragma once
// The forward passes' temporaries (activations widened, treated and packed; sums before bf16) in
// blocks that each thread keeps for its next call. A fresh block of a few MiB costs more than the
// arithmetic on it: its pages fault in on first touch (about 1.5 µs per 4 KiB page on the 2-vCPU test
// VMs), and glibc maps every block of 32 MiB or less that reaches its mmap threshold afresh. A
// 256-token layer of Llama-3.1-8B's MLP spent 15% of its time there, an 8-token one 15% too.
#include <cstddef>
#include <vector>

namespace qpolicy::cpu {

/// Frees the blocks every thread keeps for the forward passes' temporaries (at most
/// detail::scratch_cache_bytes a thread: the calling thread's and the worker threads', which run a MoE
/// layer's experts); the next forward passes allocate them again.
void release_scratch();

namespace detail {

/// What a thread keeps: its most recently freed blocks of at least scratch_min_bytes, up to this many
/// bytes in all (a block larger than that is freed at once).
inline constexpr std::size_t scratch_cache_bytes = std::size_t{128} << 20;
inline constexpr std::size_t scratch_min_bytes = std::size_t{64} << 10;

/// A block of at least `bytes`, 64-byte aligned: the calling thread's kept block of the same size
/// class (sizes rounded up to a quarter of their power of two), or a new one.
void* scratch_allocate(std::size_t bytes);
/// Returns a block of scratch_allocate(bytes) to the calling thread's blocks (or frees it).
void scratch_deallocate(void* p, std::size_t bytes) noexcept;
/// The bytes of the blocks the calling thread keeps.
std::size_t scratch_kept_bytes();

/// The allocator of scratch_vector: stateless, every instance equal.
template <class T>
struct scratch_allocator {
  using value_type = T;
  scratch_allocator() = default;
  template <class U>
  constexpr scratch_allocator(const scratch_allocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(scratch_allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { scratch_deallocate(p, n * sizeof(T)); }
  template <class U>
  friend constexpr bool operator==(const scratch_allocator&, const scratch_allocator<U>&) noexcept {
    return true;
  }
};

/// A std::vector whose storage comes from the calling thread's kept blocks.
template <class T>
using scratch_vector = std::vector<T, scratch_allocator<T>>;

}  // namespace detail
}  // namespace qpolicy::cpu
