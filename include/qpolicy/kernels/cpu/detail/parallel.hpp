#pragma once
// What the CPU fast kernels share: work split over threads (one contiguous range of work items per
// thread) on a process-wide pool of workers, and the cloned element loops' attribute (detail/isa.hpp).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "qpolicy/kernels/cpu/detail/isa.hpp"

namespace qpolicy::cpu::detail {

/// Threads for `work_items` items with `threads` requested (0: the hardware's count).
inline unsigned thread_count(unsigned threads, std::int64_t work_items) {
  const unsigned n = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>(n, work_items)));
}

/// Runs part(t) for t in [0, n) on the process's worker pool and returns when all are done
/// (rethrowing the first exception); false, with nothing run, when the pool cannot take the job
/// (another caller holds it, it has fewer workers, or this is a forked child).
/// Defined in kernels/cpu/worker_pool.cpp.
bool run_on_workers(unsigned n, const std::function<void(unsigned)>& part);

/// Runs fn(first, last) over [0, items) split into one contiguous range per thread: on the worker
/// pool, or on threads started for the call when the pool is taken.
template <class Fn>
void parallel_ranges(std::int64_t items, unsigned threads, Fn&& fn) {
  const unsigned n = thread_count(threads, items);
  if (n <= 1) {
    fn(std::int64_t{0}, items);
    return;
  }
  const std::int64_t chunk = (items + n - 1) / n;
  const auto part = [&](unsigned t) {
    const std::int64_t first = std::min(items, chunk * t), last = std::min(items, first + chunk);
    if (first < last) fn(first, last);
  };
  if (run_on_workers(n, part)) return;
  std::vector<std::thread> pool;
  pool.reserve(n - 1);
  for (unsigned t = 1; t < n; ++t) pool.emplace_back([&part, t] { part(t); });
  part(0);
  for (auto& th : pool) th.join();
}

/// Runs fn(first, last) over [0, items) in ranges of `share` items (the last one shorter), each taken
/// by whichever thread is free: where one core runs slower (a virtual machine's neighbour, a frequency
/// step), the others take more of the work instead of waiting at the end for its fixed range.
template <class Fn>
void parallel_shares(std::int64_t items, std::int64_t share, unsigned threads, Fn&& fn) {
  const std::int64_t shares = (items + share - 1) / share;
  std::atomic<std::int64_t> next{0};
  parallel_ranges(shares, threads, [&](std::int64_t, std::int64_t) {
    for (std::int64_t s = next.fetch_add(1, std::memory_order_relaxed); s < shares; s = next.fetch_add(1, std::memory_order_relaxed))
      fn(s * share, std::min(items, (s + 1) * share));
  });
}

}  // namespace qpolicy::cpu::detail
