#pragma once
// The timing rule of every benchmark: the best of several runs, in seconds.
#include <algorithm>
#include <chrono>
#include <functional>

namespace qpolicy::bench {

/// The shortest of `runs` runs of `fn`, in seconds.
inline double best_seconds(int runs, const std::function<void()>& fn) {
  double best = 1e300;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace qpolicy::bench
