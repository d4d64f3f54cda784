// CPU FP8 GEMM throughput on DeepGEMM's (N, K) shapes (each / 4, M = 256, so a 2-core run takes
// seconds): per-tensor and block-scaled GEMMs, and a whole fp8_per_block linear forward (activation
// quantization included), against the float32 GEMM of the same shape on the same blocked kernel,
// measured in this run. Best of several runs.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <cstdio>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "qpolicy/kernels/cpu/cpu_target.hpp"
#include "best_time.hpp"
#include "linear_bench.hpp"
#include "qpolicy/kernels/cpu/forward.hpp"
#include "qpolicy/schemes/registry.hpp"
#include "qpolicy/kernels/cpu/detail/gemm_tiled.hpp"

namespace qp = qpolicy;
using qpolicy::bench::best_seconds;
namespace fp8 = qpolicy::fp8;
namespace cpu = qpolicy::cpu;

namespace {

/// Every shorthand's linear layer at M = 1, 8 and 256 on Llama-3.1-8B's MLP shapes (gate/up rows
/// [14336, 4096], down [4096, 14336]). Each figure is the best of `runs` rounds. A round times every
/// layer of the shape once at each M, each call right after a float32 call of the same M, and a
/// scheme's ratio is to the best of the float32 calls made beside it: this VM's speed drifts by 2x over
/// seconds, and rounds spread a scheme's runs over the whole shape's time, so one slow phase does not
/// take them all.
void linear_layers(std::string_view only, int runs, std::int64_t only_m) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const auto& [n, k] : {std::pair<std::int64_t, std::int64_t>{14336, 4096}, {4096, 14336}}) {
    qp::bench::linear_shape s{n, k, std::vector<float>(static_cast<std::size_t>(n * k)), std::vector<std::uint16_t>(static_cast<std::size_t>(n * k))};
    for (std::size_t i = 0; i < s.w_f32.size(); ++i) s.w_bf16[i] = fp8::to_bf16(s.w_f32[i] = 0.02f * normal(rng));
    struct scheme_layer {
      std::string_view name;
      qp::bench::layer_call call;
    };
    std::vector<scheme_layer> layers;
    const auto each = [&](auto scheme) {
      using Scheme = decltype(scheme);
      if (only.empty() || only == Scheme::name) layers.push_back({Scheme::name, qp::bench::make_layer_call<Scheme>(s)});
    };
    qp::registry::for_each_type(qp::registry::fp8_scheme_types, each);
    qp::registry::for_each_type(qp::registry::weight_only_scheme_types, each);
    struct batch {
      std::int64_t m;
      std::vector<float> xf, out;
      std::vector<std::uint16_t> x, outb;
      std::vector<double> best, best_f32;  // per layer
    };
    std::vector<batch> batches;
    for (const std::int64_t m : {1, 8, 256}) {
      if (only_m != 0 && m != only_m) continue;
      batch b{m, std::vector<float>(static_cast<std::size_t>(m * k)), std::vector<float>(static_cast<std::size_t>(m * n)), {}, {},
              std::vector<double>(layers.size(), 1e300), std::vector<double>(layers.size(), 1e300)};
      b.x.resize(b.xf.size());
      b.outb.resize(b.out.size());
      for (std::size_t i = 0; i < b.x.size(); ++i) b.xf[i] = fp8::from_bf16(b.x[i] = fp8::to_bf16(normal(rng)));
      batches.push_back(std::move(b));
    }
    // The machine's memcpy of the float32 weights' bytes on every hardware thread (the GEMMs' threads),
    // bytes read and written per second: the bound the float32 GEMM's stream of weights approaches at M = 1.
    std::vector<float> copy(s.w_f32.size());
    const unsigned copiers = std::max(1u, std::thread::hardware_concurrency());
    const double memcpy_s = best_seconds(runs + 1, [&] {
      std::vector<std::thread> pool;
      const std::size_t part = (copy.size() + copiers - 1) / copiers;
      for (unsigned t = 0; t < copiers; ++t)
        pool.emplace_back([&, t] {
          const std::size_t first = std::min(copy.size(), t * part), count = std::min(copy.size() - first, part);
          std::memcpy(copy.data() + first, s.w_f32.data() + first, count * 4);
        });
      for (auto& th : pool) th.join();
    });
    const double memcpy_gbs = 2 * 4e-9 * static_cast<double>(n * k) / memcpy_s;
    fmt::print("bench: memcpy_{}x{}_f32 {:.1f} GB/s (read and written, {} threads)\n", n, k, memcpy_gbs, copiers);
    for (int round = 0; round < runs; ++round)
      for (auto& b : batches)
        for (std::size_t l = 0; l < layers.size(); ++l) {
          b.best_f32[l] = std::min(b.best_f32[l], best_seconds(1, [&] { cpu::gemm_f32(b.xf.data(), s.w_f32.data(), b.m, n, k, b.out.data()); }));
          b.best[l] = std::min(b.best[l], best_seconds(1, [&] { layers[l].call(b.x, b.m, b.outb); }));
        }
    for (const auto& b : batches) {
      const double flops = 2.0 * static_cast<double>(b.m * n) * static_cast<double>(k);
      const auto shape = fmt::format("m{}_{}x{}x{}", b.m, b.m, n, k);
      for (std::size_t l = 0; l < layers.size(); ++l)
        fmt::print("bench: cpu_linear_{}_{} {:.1f} GFLOPS vs f32_gemm {:.2f}x\n", layers[l].name, shape, flops / b.best[l] / 1e9,
                   b.best_f32[l] / b.best[l]);
      if (layers.empty()) continue;
      const double t_f32 = *std::min_element(b.best_f32.begin(), b.best_f32.end());
      const double weights_gbs = 4e-9 * static_cast<double>(n * k) / t_f32;
      fmt::print("bench: cpu_linear_f32_{} {:.1f} GFLOPS ({:.1f} GB/s of weights, {:.2f}x memcpy)\n", shape, flops / t_f32 / 1e9,
                 weights_gbs, weights_gbs / memcpy_gbs);
    }
  }
}

}  // namespace

int main() {
  // The CPU target the kernels run (QPOLICY_CPU_TARGET forces one this CPU attains), first: figures are per target.
  if (auto problem = qpolicy::cpu::cpu_target_setting_problem()) {
    fmt::print(stderr, "error: {}\n", *problem);
    return 1;
  }
  fmt::print("target: {}\n", qpolicy::cpu::name_of(qpolicy::cpu::active_cpu_target()));
  // QPOLICY_GEMM_BENCH_ONLY=SCHEME: only that scheme's linear layers (to profile one), each figure the
  // best of QPOLICY_GEMM_BENCH_RUNS runs (default 3; more ride out a noisy machine).
  const char* only_env = std::getenv("QPOLICY_GEMM_BENCH_ONLY");
  const std::string_view only = only_env ? only_env : "";
  const char* runs_env = std::getenv("QPOLICY_GEMM_BENCH_RUNS");
  const int runs = runs_env ? std::atoi(runs_env) : 3;
  if (runs < 1) {
    fmt::print(stderr, "QPOLICY_GEMM_BENCH_RUNS is '{}'; expected a whole number of runs, 1 or more\n", runs_env);
    return 1;
  }
  // QPOLICY_GEMM_BENCH_M=1|8|256: only the linear layers' batches of that many rows.
  const char* m_env = std::getenv("QPOLICY_GEMM_BENCH_M");
  const std::int64_t only_m = m_env ? std::atoll(m_env) : 0;
  if (m_env && only_m != 1 && only_m != 8 && only_m != 256) {
    fmt::print(stderr, "QPOLICY_GEMM_BENCH_M is '{}'; expected 1, 8 or 256\n", m_env);
    return 1;
  }
  if (!only.empty()) {
    linear_layers(only, runs, only_m);
    return 0;
  }
  const std::int64_t m = 256;
  const std::int64_t shapes[][2] = {{2112, 7168}, {24576, 1536}, {32768, 512}, {7168, 16384}, {4096, 7168}, {7168, 2048}};
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  fmt::print("# M={}, DeepGEMM's (N, K) / 4, {} hardware threads\n", m, std::thread::hardware_concurrency());
  double fp8_sum = 0, f32_sum = 0;
  for (const auto& s : shapes) {
    const std::int64_t n = s[0] / 4, k = s[1] / 4;
    std::vector<float> af(static_cast<std::size_t>(m * k)), wf(static_cast<std::size_t>(n * k)), out(static_cast<std::size_t>(m * n));
    for (auto& v : af) v = normal(rng);
    for (auto& v : wf) v = 0.02f * normal(rng);
    std::vector<std::uint16_t> xb(af.size()), wb(wf.size()), outb(out.size());
    for (std::size_t i = 0; i < af.size(); ++i) xb[i] = fp8::to_bf16(af[i]);
    for (std::size_t i = 0; i < wf.size(); ++i) wb[i] = fp8::to_bf16(wf[i]);
    const qpolicy::input_view x{xb.data(), qpolicy::element::bf16, m, k}, w{wb.data(), qpolicy::element::bf16, n, k};
    std::vector<std::uint8_t> qa(af.size()), qw(wf.size());
    std::uniform_int_distribution<int> code(0, 0x7E);
    for (auto& c : qa) c = static_cast<std::uint8_t>(code(rng));
    for (auto& c : qw) c = static_cast<std::uint8_t>(code(rng));
    std::vector<float> sa(static_cast<std::size_t>(m * (k / 128)), 0.01f), sw(static_cast<std::size_t>(((n + 127) / 128) * (k / 128)), 0.01f);
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    const int runs = 3;
    const double t_f32 = best_seconds(runs, [&] { cpu::gemm_f32(af.data(), wf.data(), m, n, k, out.data()); });
    const double t_tensor = best_seconds(runs, [&] {
      cpu::gemm_scaled(qa.data(), sa.data(), false, qw.data(), sw.data(), false, m, n, k, out.data());
    });
    const double t_block = best_seconds(runs, [&] { cpu::gemm_blocked(qa.data(), sa.data(), qw.data(), sw.data(), m, n, k, out.data()); });
    const auto layer = cpu::quantize_linear<qp::fp8_per_block>(w, nullptr);
    const double t_linear = best_seconds(runs, [&] { cpu::linear_forward<qp::fp8_per_block>(layer, x, outb.data()); });
    const auto gf = [&](double t) { return flops / t / 1e9; };
    const auto shape = fmt::format("{}x{}x{}", m, n, k);
    fmt::print("bench: cpu_gemm_f32_{} {:.1f} GFLOPS\n", shape, gf(t_f32));
    fmt::print("bench: cpu_gemm_fp8_per_tensor_{} {:.1f} GFLOPS vs f32_gemm {:.2f}x\n", shape, gf(t_tensor), t_f32 / t_tensor);
    fmt::print("bench: cpu_gemm_fp8_block_{} {:.1f} GFLOPS vs f32_gemm {:.2f}x\n", shape, gf(t_block), t_f32 / t_block);
    fmt::print("bench: cpu_linear_fp8_per_block_{} {:.1f} GFLOPS vs f32_gemm {:.2f}x\n", shape, gf(t_linear), t_f32 / t_linear);
    fp8_sum += t_block;
    f32_sum += t_f32;
  }
  fmt::print("bench: cpu_gemm_fp8_block_all_shapes {:.3f} s vs f32_gemm {:.2f}x\n", fp8_sum, f32_sum / fp8_sum);
  linear_layers(only, runs, only_m);
  return 0;
}
