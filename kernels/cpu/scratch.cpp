// The forward passes' kept blocks (detail/scratch.hpp): per thread, the most recently freed blocks by
// size class, the oldest freed first when they would pass scratch_cache_bytes.
#include "qpolicy/kernels/cpu/detail/scratch.hpp"

#include <algorithm>
#include <bit>
#include <new>

namespace qpolicy::cpu {

namespace {

constexpr std::align_val_t scratch_alignment{64};

/// bytes rounded up to a quarter of its power of two (at most 25% more), so that a block freed by a
/// vector of one size serves the next vector of about that size.
std::size_t class_bytes(std::size_t bytes) {
  const std::size_t quarter = std::max<std::size_t>(std::bit_floor(bytes) / 4, 64);
  return (bytes + quarter - 1) / quarter * quarter;
}

struct kept_block {
  void* p;
  std::size_t bytes;  // its size class
};

thread_local bool thread_ending = false;  // set once the thread's kept blocks are freed

/// A thread's kept blocks, oldest first; freed when the thread ends.
struct kept_blocks {
  std::vector<kept_block> blocks;
  std::size_t bytes = 0;
  void free_oldest() {
    ::operator delete(blocks.front().p, scratch_alignment);
    bytes -= blocks.front().bytes;
    blocks.erase(blocks.begin());
  }
  void release() {
    while (!blocks.empty()) free_oldest();
  }
  ~kept_blocks() {
    release();
    thread_ending = true;
  }
};

kept_blocks& kept() {
  thread_local kept_blocks blocks;
  return blocks;
}

}  // namespace

void release_scratch() { kept().release(); }

namespace detail {

void* scratch_allocate(std::size_t bytes) {
  if (bytes < scratch_min_bytes || thread_ending) return ::operator new(std::max<std::size_t>(bytes, 1), scratch_alignment);
  const std::size_t size = class_bytes(bytes);
  auto& k = kept();
  // The most recently kept block of the class: the one most likely still in cache.
  const auto hit = std::find_if(k.blocks.rbegin(), k.blocks.rend(), [&](const kept_block& b) { return b.bytes == size; });
  if (hit == k.blocks.rend()) return ::operator new(size, scratch_alignment);
  void* p = hit->p;
  k.bytes -= size;
  k.blocks.erase(std::next(hit).base());
  return p;
}

std::size_t scratch_kept_bytes() { return thread_ending ? 0 : kept().bytes; }

void scratch_deallocate(void* p, std::size_t bytes) noexcept {
  if (!p) return;
  if (bytes < scratch_min_bytes) return ::operator delete(p, scratch_alignment);
  const std::size_t size = class_bytes(bytes);
  if (size > scratch_cache_bytes || thread_ending) return ::operator delete(p, scratch_alignment);
  auto& k = kept();
  try {
    k.blocks.reserve(k.blocks.size() + 1);
  } catch (const std::bad_alloc&) {
    return ::operator delete(p, scratch_alignment);
  }
  while (k.bytes + size > scratch_cache_bytes) k.free_oldest();
  k.blocks.push_back({p, size});
  k.bytes += size;
}

}  // namespace detail
}  // namespace qpolicy::cpu
