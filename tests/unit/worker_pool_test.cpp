// The CPU kernels' worker pool (kernels/cpu/worker_pool.cpp, through parallel_ranges): every item
// exactly once, exceptions back to the caller, nested and concurrent callers served by threads of
// their own, and a forked child that has no workers.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "qpolicy/kernels/cpu/detail/parallel.hpp"

using qpolicy::cpu::detail::parallel_ranges;
using qpolicy::cpu::detail::run_on_workers;

namespace {

/// How many times each of `items` was visited by a parallel_ranges over `threads`.
std::vector<int> visits(std::int64_t items, unsigned threads) {
  std::vector<std::atomic<int>> seen(static_cast<std::size_t>(items));
  parallel_ranges(items, threads, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t i = first; i < last; ++i) seen[static_cast<std::size_t>(i)]++;
  });
  std::vector<int> out;
  for (auto& s : seen) out.push_back(s.load());
  return out;
}

}  // namespace

TEST_CASE("parallel_ranges visits every item once, on the pool or not", "[unit][pool]") {
  for (const std::int64_t items : {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{7}, std::int64_t{1000}})
    for (const unsigned threads : {0u, 1u, 2u, 3u, 16u}) {
      INFO(items << " items, " << threads << " threads");
      CHECK(visits(items, threads) == std::vector<int>(static_cast<std::size_t>(items), 1));
    }
}

TEST_CASE("the pool runs every part once and hands back the first exception", "[unit][pool]") {
  const unsigned n = std::max(2u, std::thread::hardware_concurrency());
  std::vector<std::atomic<int>> ran(n);
  if (!run_on_workers(n, [&](unsigned t) { ran[t]++; })) {
    WARN("skipped: the pool could not take a job of " << n << " parts here");
    return;
  }
  for (auto& r : ran) CHECK(r.load() == 1);
  CHECK_THROWS_WITH(run_on_workers(n, [&](unsigned t) {
                      if (t == n - 1) throw std::runtime_error("part failed");
                    }),
                    "part failed");
  // Still usable afterwards.
  std::atomic<unsigned> sum{0};
  CHECK(run_on_workers(n, [&](unsigned t) { sum += t + 1; }));
  CHECK(sum.load() == n * (n + 1) / 2);
}

TEST_CASE("nested and concurrent callers are served, not deadlocked", "[unit][pool]") {
  // A part that runs a parallel kernel itself: the inner call takes threads of its own.
  std::atomic<int> inner{0};
  parallel_ranges(4, 2, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t i = first; i < last; ++i)
      parallel_ranges(10, 2, [&](std::int64_t a, std::int64_t b) { inner += static_cast<int>(b - a); });
  });
  CHECK(inner.load() == 40);
  // Four callers at once: one has the pool, the others start threads.
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int k = 0; k < 50; ++k)
        if (visits(257, 2) != std::vector<int>(257, 1)) wrong++;
    });
  for (auto& t : callers) t.join();
  CHECK(wrong.load() == 0);
}

TEST_CASE("a forked child runs parallel kernels without the parent's workers", "[unit][pool]") {
  REQUIRE(visits(100, 2) == std::vector<int>(100, 1));  // the parent's pool exists now
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(visits(1000, 2) == std::vector<int>(1000, 1) ? 0 : 1);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
