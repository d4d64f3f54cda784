// CPU quantization throughput per formula (every row of the registry): input bytes per second of the fast path, against memcpy of
// the same bytes and against the scalar reference, both measured in this run. Best of several runs.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../support/random_operands.hpp"
#include "best_time.hpp"
#include "qpolicy/kernels/cpu/reference.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"
#include "qpolicy/schemes/registry.hpp"

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
  // Every formula of the registry, fast path against reference, outputs as the formula stores them.
  std::vector<float> second(static_cast<std::size_t>(rows));
  qp::registry::for_each_type(qp::registry::formula_types, [&](auto tag) {
    using formula = decltype(tag);
    const auto& f = qp::schemes::formula_of(formula::id);
    void* scales = f.scales == qp::schemes::scale_format::f32 ? static_cast<void*>(s.data()) : sb.data();
    const qp::quantized_outputs out{q.data(), scales, second.data()};
    const double fast = best_seconds(runs, [&] { qp::cpu::quantize<formula>(x, out); });
    const double slow = best_seconds(2, [&] { ref::quantize<formula>(x, out); });
    fmt::print("bench: cpu_{} {:.2f} GB/s vs memcpy {:.2f}x\n", f.name, bytes / fast / 1e9, memcpy_s / fast);
    fmt::print("bench: cpu_{}_speedup {:.2f} x vs scalar_reference {:.2f}x\n", f.name, slow / fast, slow / fast);
  });
  return 0;
}
