#pragma once
// The timing rule of every benchmark: the best of several runs, in seconds.
#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

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

/// The shortest of `runs` runs of each of `fn` and `baseline`, run in turns, in seconds: on a machine
/// whose speed drifts, the ratio of the two then compares runs made under the same conditions.
inline std::pair<double, double> best_seconds_alternating(int runs, const std::function<void()>& fn, const std::function<void()>& baseline) {
  double best = 1e300, best_baseline = 1e300;
  for (int i = 0; i < runs; ++i) {
    best_baseline = std::min(best_baseline, best_seconds(1, baseline));
    best = std::min(best, best_seconds(1, fn));
  }
  return {best, best_baseline};
}

}  // namespace qpolicy::bench
