// The forward passes' kept blocks (kernels/cpu/scratch.cpp): a freed block serves the thread's next
// vector of about its size, stays within the per-thread bound, and release_scratch frees every thread's.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "qpolicy/kernels/cpu/detail/scratch.hpp"

namespace cpu = qpolicy::cpu;
using cpu::detail::scratch_kept_bytes;
using cpu::detail::scratch_vector;

namespace {
bool aligned64(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }
}  // namespace

TEST_CASE("a freed scratch block serves the thread's next vector of about its size", "[unit][scratch]") {
  cpu::release_scratch();
  const float* first = nullptr;
  {
    scratch_vector<float> v(1 << 20, 1.0f);
    first = v.data();
    CHECK(aligned64(first));
  }
  CHECK(scratch_kept_bytes() >= (std::size_t{1} << 22));
  {
    scratch_vector<float> same_class((1 << 20) - 1000);  // rounded up to the same class
    CHECK(same_class.data() == first);
    CHECK(same_class.front() == 0.0f);  // value-initialized, as any vector
    CHECK(scratch_kept_bytes() == 0);
    scratch_vector<float> other(1 << 18);
    CHECK(other.data() != first);
  }
  {
    scratch_vector<std::uint8_t> small(100, 7);  // below the kept size: an ordinary block
    CHECK(aligned64(small.data()));
    CHECK(small[99] == 7);
  }
  CHECK(scratch_kept_bytes() == (std::size_t{1} << 22) + (std::size_t{1} << 20));
  cpu::release_scratch();
  CHECK(scratch_kept_bytes() == 0);
}

TEST_CASE("a thread keeps at most scratch_cache_bytes, and its own frees only", "[unit][scratch]") {
  cpu::release_scratch();
  {
    scratch_vector<char> larger(cpu::detail::scratch_cache_bytes + 1);  // never kept
  }
  CHECK(scratch_kept_bytes() == 0);
  for (std::size_t mib = 1; mib <= 64; mib *= 2) {
    scratch_vector<char> v(mib << 20);
  }
  CHECK(scratch_kept_bytes() <= cpu::detail::scratch_cache_bytes);
  CHECK(scratch_kept_bytes() >= (std::size_t{64} << 20));  // the most recent stays
  const std::size_t before = scratch_kept_bytes();
  std::size_t other_kept = 0;
  std::thread([&] {
    { scratch_vector<char> v(std::size_t{3} << 20); }
    other_kept = scratch_kept_bytes();
  }).join();
  CHECK(other_kept == (std::size_t{3} << 20));
  CHECK(scratch_kept_bytes() == before);
  cpu::release_scratch();
}

TEST_CASE("release_scratch frees the blocks other threads keep", "[unit][scratch]") {
  cpu::release_scratch();
  std::mutex m;
  std::condition_variable cv;
  int stage = 0;  // 1: the worker keeps a block; 2: released; 3: the worker has looked
  std::size_t kept_before = 0, kept_after = 0;
  std::thread worker([&] {
    { scratch_vector<char> v(std::size_t{2} << 20); }
    kept_before = scratch_kept_bytes();
    std::unique_lock<std::mutex> l(m);
    stage = 1;
    cv.notify_all();
    cv.wait(l, [&] { return stage == 2; });
    kept_after = scratch_kept_bytes();
    stage = 3;
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return stage == 1; });
    cpu::release_scratch();
    stage = 2;
    cv.notify_all();
    cv.wait(l, [&] { return stage == 3; });
  }
  worker.join();
  CHECK(kept_before == (std::size_t{2} << 20));
  CHECK(kept_after == 0);
}
