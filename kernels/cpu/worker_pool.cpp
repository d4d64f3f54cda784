// The CPU kernels' worker pool (parallel.hpp): one worker per CPU, started on the first parallel call
// and kept, each pinned to its own CPU of the process's affinity mask; the caller is never pinned and
// only waits. Why: on the 2-vCPU development VM, two threads started per call, or
// a pool of unpinned workers, ran the per-channel kernel at 4.5 GB/s in about half of the runs (the
// scheduler kept both threads on one CPU; one thread alone makes 4.0) and at 7.0 in the others; with
// the worker pinned it made 7.9-8.1 GB/s in every run.
#include <unistd.h>

#include <condition_variable>
#include <exception>
#include <mutex>

#include "qpolicy/kernels/cpu/detail/parallel.hpp"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace qpolicy::cpu::detail {

namespace {

/// Whether this thread is running a part of a pool job (its caller's part or a worker's).
thread_local bool in_job = false;

struct job_scope {
  job_scope() { in_job = true; }
  ~job_scope() { in_job = false; }
  job_scope(const job_scope&) = delete;
  job_scope& operator=(const job_scope&) = delete;
};

class worker_pool {
 public:
  worker_pool() : owner_(getpid()) {
    const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    std::vector<int> allowed = allowed_cpus();
    for (unsigned w = 0; w < cpus; ++w) {
      const int cpu = allowed.size() > 1 ? allowed[w % allowed.size()] : -1;
      std::thread([this, w, cpu] { work(w, cpu); }).detach();  // lives as long as the process
    }
    workers_ = cpus;
  }

  bool run(unsigned n, const std::function<void(unsigned)>& part) {
    // A forked child has no workers; a part that itself runs a parallel kernel takes threads of its own.
    if (getpid() != owner_ || n > workers_ || in_job) return false;
    std::unique_lock taken(busy_, std::try_to_lock);
    if (!taken) return false;  // another caller has the pool
    const job_scope scope;
    {
      std::lock_guard lock(mutex_);
      part_ = &part;
      parts_ = n;
      pending_ = n;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    // Every part runs on a pinned worker and the caller only waits: wherever the scheduler has put
    // the caller (after a long single-threaded step it may sit on a worker's CPU), no two parts share
    // a CPU.
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    part_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  const pid_t owner_;
  unsigned workers_ = 0;
  std::mutex busy_;   // held by the caller whose job the workers run
  std::mutex mutex_;  // guards the job below
  std::condition_variable wake_, done_;
  const std::function<void(unsigned)>* part_ = nullptr;
  unsigned parts_ = 0;
  unsigned pending_ = 0;
  std::uint64_t generation_ = 0;
  std::exception_ptr error_;

  static std::vector<int> allowed_cpus() {
    std::vector<int> out;
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) out.push_back(c);
#endif
    return out;
  }

  void work(unsigned w, int cpu) {
#if defined(__linux__)
    if (cpu >= 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      pthread_setaffinity_np(pthread_self(), sizeof one, &one);  // best effort: unpinned still works
    }
#else
    (void)cpu;
#endif
    std::uint64_t seen = 0;
    while (true) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (w >= parts_) continue;  // a job with fewer parts than workers
      const auto* part = part_;
      lock.unlock();
      std::exception_ptr failed;
      try {
        const job_scope scope;
        (*part)(w);
      } catch (...) {
        failed = std::current_exception();
      }
      lock.lock();
      if (failed && !error_) error_ = failed;
      if (--pending_ == 0) done_.notify_one();
    }
  }
};

}  // namespace

bool run_on_workers(unsigned n, const std::function<void(unsigned)>& part) {
  if (n <= 1) {
    part(0);
    return true;
  }
  // Made on first use and never destroyed: its workers may outlive static destructors.
  static worker_pool* const pool = new worker_pool();
  return pool->run(n, part);
}

}  // namespace qpolicy::cpu::detail
