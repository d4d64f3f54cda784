// The forward passes' kept blocks (detail/scratch.hpp): per thread, the most recently freed blocks by
// size class, the oldest freed first when they would pass scratch_cache_bytes. Every thread's blocks are
// listed in one registry, so that release_scratch() frees the worker threads' too; each thread's list
// has its own lock, which only release_scratch() contends for.
#include "qpolicy/kernels/cpu/detail/scratch.hpp"

#include <algorithm>
#include <bit>
#include <mutex>
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

/// A thread's kept blocks, oldest first.
struct kept_blocks {
  std::mutex lock;
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
};

/// Every live thread's kept blocks.
struct registry {
  std::mutex lock;
  std::vector<kept_blocks*> threads;
};
registry& all_threads() {
  static registry* r = new registry;  // never destroyed: threads may end after static destruction began
  return *r;
}

thread_local bool thread_ending = false;  // set once the thread's kept blocks are freed

/// The calling thread's kept blocks, listed in the registry while the thread lives.
struct thread_blocks {
  kept_blocks blocks;
  thread_blocks() {
    std::lock_guard<std::mutex> g(all_threads().lock);
    all_threads().threads.push_back(&blocks);
  }
  ~thread_blocks() {
    {
      std::lock_guard<std::mutex> g(all_threads().lock);
      auto& t = all_threads().threads;
      t.erase(std::find(t.begin(), t.end(), &blocks));
    }
    blocks.release();
    thread_ending = true;
  }
};

kept_blocks& kept() {
  thread_local thread_blocks mine;
  return mine.blocks;
}

}  // namespace

void release_scratch() {
  std::lock_guard<std::mutex> g(all_threads().lock);
  for (kept_blocks* k : all_threads().threads) {
    std::lock_guard<std::mutex> own(k->lock);
    k->release();
  }
}

namespace detail {

std::size_t scratch_kept_bytes() {
  if (thread_ending) return 0;
  auto& k = kept();
  std::lock_guard<std::mutex> g(k.lock);
  return k.bytes;
}

void* scratch_allocate(std::size_t bytes) {
  if (bytes < scratch_min_bytes || thread_ending) return ::operator new(std::max<std::size_t>(bytes, 1), scratch_alignment);
  const std::size_t size = class_bytes(bytes);
  auto& k = kept();
  {
    std::lock_guard<std::mutex> g(k.lock);
    // The most recently kept block of the class: the one most likely still in cache.
    const auto hit = std::find_if(k.blocks.rbegin(), k.blocks.rend(), [&](const kept_block& b) { return b.bytes == size; });
    if (hit != k.blocks.rend()) {
      void* p = hit->p;
      k.bytes -= size;
      k.blocks.erase(std::next(hit).base());
      return p;
    }
  }
  return ::operator new(size, scratch_alignment);
}

void scratch_deallocate(void* p, std::size_t bytes) noexcept {
  if (!p) return;
  if (bytes < scratch_min_bytes) return ::operator delete(p, scratch_alignment);
  const std::size_t size = class_bytes(bytes);
  if (size > scratch_cache_bytes || thread_ending) return ::operator delete(p, scratch_alignment);
  auto& k = kept();
  std::lock_guard<std::mutex> g(k.lock);
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
