// CUDA quantization throughput per scheme on an 8192x8192 bf16 tensor: input bytes per second from
// CUDA events (best of 20), against a device-to-device cudaMemcpy of the same bytes in the same run.
// Without a device it says so and exits 0 (benchmarks do not fail for want of hardware).
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "../support/random_operands.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"
#include "qpolicy/kernels/cuda/device_info.hpp"
#include "qpolicy/kernels/cuda/device_memory.hpp"
#include "best_gpu_time.hpp"

namespace qp = qpolicy;
namespace fp8 = qpolicy::fp8;

namespace {
/// Best of 20 event-timed runs, in milliseconds.
double best_ms(const std::function<void()>& fn) { return qpolicy::bench::best_gpu_seconds(20, fn) * 1e3; }
}  // namespace

int main() {
  const auto report = qp::cuda::query_devices();
  if (report.count == 0) {
    std::printf("cuda bench: skipped: %s\n", report.description.c_str());
    return 0;
  }
  const std::int64_t rows = 8192, cols = 8192;
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  std::mt19937 rng(1);
  const auto host = qpolicy::test::random_bf16(n, 0.02f, rng);
  const qp::cuda::device_memory in_memory = qp::cuda::to_device(host.data(), n * 2), copy_memory(n * 2), q_memory(n),
                                 s_memory(static_cast<std::size_t>(rows) * 64 * sizeof(float)), scratch_memory(4);
  void* in = in_memory.get();
  void* copy = copy_memory.get();
  auto* q = q_memory.as<std::uint8_t>();
  auto* s = s_memory.as<float>();
  auto* scratch = scratch_memory.as<std::uint32_t>();
  const qpolicy::input_view x{in, qpolicy::element::bf16, rows, cols};
  const double bytes = static_cast<double>(n * 2);
  const double memcpy_ms = best_ms([&] { cudaMemcpyAsync(copy, in, n * 2, cudaMemcpyDeviceToDevice); });
  std::printf("# %s, %lldx%lld bf16; device memcpy %.1f GB/s (read+write)\n", report.description.c_str(),
              static_cast<long long>(rows), static_cast<long long>(cols), 2 * bytes / memcpy_ms / 1e6);
  const qp::fp8::block_options blocks{};
  const qp::fp8::group_options groups{};
  const std::vector<std::pair<const char*, std::function<void()>>> kernels{
      {"weight_per_tensor", [&] { qp::cuda::weight_kernel<qp::fp8_per_tensor>::run(x, q, s, scratch); }},
      {"weight_per_channel", [&] { qp::cuda::weight_kernel<qp::fp8_per_channel>::run(x, q, s); }},
      {"weight_block_128x128", [&] { qp::cuda::weight_kernel<qp::fp8_per_block>::run(x, blocks, q, s); }},
      {"act_per_token", [&] { qp::cuda::activation_kernel<qp::fp8_per_token>::run(x, q, s); }},
      {"act_per_tensor", [&] { qp::cuda::activation_kernel<qp::fp8_per_tensor_dynamic>::run(x, q, s, scratch); }},
      {"act_group_1x128", [&] { qp::cuda::activation_kernel<qp::fp8_per_block_dynamic>::run(x, groups, q, s); }},
  };
  for (const auto& [name, fn] : kernels) {
    const double ms = best_ms(fn);
    std::printf("bench: cuda_%s %.1f GB/s vs device_memcpy %.2fx\n", name, bytes / ms / 1e6, memcpy_ms / ms);
  }
  return 0;
}
