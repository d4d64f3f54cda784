#pragma once
// The timing rule of the GPU benchmarks: one warm-up, then the best of several runs timed with CUDA
// events on the default stream, in seconds.
#include <cuda_runtime.h>

#include <functional>

namespace qpolicy::bench {

/// The shortest of `runs` event-timed runs of `fn` (after one warm-up), in seconds.
inline double best_gpu_seconds(int runs, const std::function<void()>& fn) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  fn();
  cudaDeviceSynchronize();
  float best = 1e30f;
  for (int i = 0; i < runs; ++i) {
    cudaEventRecord(start);
    fn();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    best = ms < best ? ms : best;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best / 1e3;
}

}  // namespace qpolicy::bench
