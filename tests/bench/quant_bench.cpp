// CPU quantization throughput per scheme: input bytes per second of the fast path, against memcpy of
// the same bytes and against the scalar reference, both measured in this run. Best of several runs.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../support/random_operands.hpp"
#include "best_time.hpp"
#include "qpolicy/kernels/cpu/low_precision.hpp"
#include "qpolicy/kernels/cpu/low_precision_reference.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"

namespace qp = qpolicy;
using qpolicy::bench::best_seconds;
namespace fp8 = qpolicy::fp8;
namespace ref = qpolicy::cpu::reference;

int main() {
  const std::int64_t rows = 4096, cols = 4096;
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  std::mt19937 rng(1);
  const auto w = qpolicy::test::random_bf16(n, 0.02f, rng);
  const qpolicy::input_view x{w.data(), qpolicy::element::bf16, rows, cols};
  std::vector<std::uint8_t> q(n), copy(n * 2);
  std::vector<float> s(static_cast<std::size_t>(rows) * 32 + 64);
  std::vector<std::uint8_t> sb(n / 16);  // block scales (E8M0 or e4m3 bytes)
  const double bytes = static_cast<double>(n * 2);
  const int runs = 5;
  const double memcpy_s = best_seconds(runs, [&] { std::memcpy(copy.data(), w.data(), n * 2); });
  fmt::print("# {}x{} bf16 ({:.0f} MB), {} hardware threads; memcpy {:.2f} GB/s\n", rows, cols, bytes / 1e6,
             std::thread::hardware_concurrency(), bytes / memcpy_s / 1e9);
  const ref::block_options blocks{};
  const ref::group_options groups{};
  struct kernel {
    const char* name;
    std::function<void()> fast, reference;
  };
  const std::vector<kernel> kernels{
      {"weight_per_tensor", [&] { qp::cpu::weight_kernel<qp::fp8_per_tensor>::run(x, q.data(), s.data()); },
       [&] { ref::weight_per_tensor(x, q.data(), s.data()); }},
      {"weight_per_channel", [&] { qp::cpu::weight_kernel<qp::fp8_per_channel>::run(x, q.data(), s.data()); },
       [&] { ref::weight_per_channel(x, q.data(), s.data()); }},
      {"weight_block_128x128", [&] { qp::cpu::weight_kernel<qp::fp8_per_block>::run(x, blocks, q.data(), s.data()); },
       [&] { ref::block_128x128(x, blocks, q.data(), s.data()); }},
      {"act_per_token", [&] { qp::cpu::activation_kernel<qp::fp8_per_token>::run(x, q.data(), s.data()); },
       [&] { ref::dynamic_per_token(x, q.data(), s.data()); }},
      {"act_per_tensor", [&] { qp::cpu::activation_kernel<qp::fp8_per_tensor_dynamic>::run(x, q.data(), s.data()); },
       [&] { ref::dynamic_per_tensor(x, q.data(), s.data()); }},
      {"act_group_1x128", [&] { qp::cpu::activation_kernel<qp::fp8_per_block_dynamic>::run(x, groups, q.data(), s.data()); },
       [&] { ref::per_token_group(x, groups, q.data(), s.data()); }},
      // The low-precision formulas (quantize-tensor's keys), outputs as they store them.
      {"mxfp8", [&] { qp::cpu::lp_kernel<qp::formulas::mxfp8_torch>::run(x, {q.data(), sb.data(), nullptr, nullptr, false}); },
       [&] { ref::mxfp8_torch(x, q.data(), sb.data()); }},
      {"mxfp8_dynamic", [&] { qp::cpu::lp_kernel<qp::formulas::mxfp8_flashinfer>::run(x, {q.data(), sb.data(), nullptr, nullptr, false}); },
       [&] { ref::mxfp8_flashinfer(x, q.data(), sb.data()); }},
      {"mxfp4", [&] { qp::cpu::lp_kernel<qp::formulas::mxfp4_even>::run(x, {q.data(), sb.data(), nullptr, nullptr, false}); },
       [&] { ref::mxfp4_even(x, q.data(), sb.data()); }},
      {"mxfp4_dynamic", [&] { qp::cpu::lp_kernel<qp::formulas::mxfp4_rceil>::run(x, {q.data(), sb.data(), nullptr, nullptr, false}); },
       [&] { ref::mxfp4_flashinfer(x, q.data(), sb.data()); }},
      {"int8_per_channel_static",
       [&] { qp::cpu::lp_kernel<qp::formulas::int8_per_channel>::run(x, {q.data(), nullptr, s.data(), nullptr, false}); },
       [&] { ref::int8_per_channel(x, reinterpret_cast<std::int8_t*>(q.data()), s.data()); }},
      {"nvfp4", [&] { qp::cpu::lp_kernel<qp::formulas::nvfp4_weight>::run(x, {q.data(), sb.data(), nullptr, s.data(), false}); },
       [&] { ref::nvfp4_weight(x, q.data(), sb.data()); }},
      {"nvfp4_per_token",
       [&] { qp::cpu::lp_kernel<qp::formulas::nvfp4_per_token>::run(x, {q.data(), sb.data(), s.data(), nullptr, false}); },
       [&] { ref::nvfp4_per_token(x, q.data(), sb.data(), s.data()); }},
  };
  for (const auto& k : kernels) {
    const double fast = best_seconds(runs, k.fast), slow = best_seconds(2, k.reference);
    fmt::print("bench: cpu_{} {:.2f} GB/s vs memcpy {:.2f}x\n", k.name, bytes / fast / 1e9, memcpy_s / fast);
    fmt::print("bench: cpu_{}_speedup {:.2f} x vs scalar_reference {:.2f}x\n", k.name, slow / fast, slow / fast);
  }
  return 0;
}
