// CPU quantization throughput per formula (every row of the registry): input bytes per second of the fast path, against memcpy of
// the same bytes (timed in turns with each kernel) and against the scalar reference, both measured in this run. Best of several runs.
// QPOLICY_QUANT_BENCH_ONLY=NAME limits the formulas to one.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "qpolicy/kernels/cpu/cpu_target.hpp"
#include "../support/random_operands.hpp"
#include "best_time.hpp"
#include "qpolicy/kernels/cpu/dequantize.hpp"
#include "qpolicy/kernels/cpu/weight_only_forward.hpp"
#include "qpolicy/kernels/cpu/reference.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"
#include "qpolicy/schemes/registry.hpp"

namespace qp = qpolicy;
using qpolicy::bench::best_seconds;
using qpolicy::bench::best_seconds_alternating;
namespace fp8 = qpolicy::fp8;
namespace ref = qpolicy::cpu::reference;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
/// Fused multiply-adds per second of one core with 512-bit registers (sixteen independent chains): the
/// bound of the Hadamard keys, whose rotation is 32 FMAs per element in torch-CPU's order.
__attribute__((target("avx512f"))) double fma_lanes_per_second() {
  const long n = 20000000;
  __m512 a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(0.001f);
  const auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < n; ++k)
    for (auto& v : a) v = _mm512_fmadd_ps(v, x, y);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  float sink[16];
  __m512 sum = a[0];
  for (int i = 1; i < 16; ++i) sum = _mm512_add_ps(sum, a[i]);
  _mm512_storeu_ps(sink, sum);
  return sink[0] == -1.0f ? 0.0 : double(n) * 16 * 16 / s;
}
#endif

int main() {
  // The CPU target the kernels run (QPOLICY_CPU_TARGET forces one this CPU attains), first: figures are per target.
  if (auto problem = qpolicy::cpu::cpu_target_setting_problem()) {
    fmt::print(stderr, "error: {}\n", *problem);
    return 1;
  }
  fmt::print("target: {}\n", qpolicy::cpu::name_of(qpolicy::cpu::active_cpu_target()));
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
  std::vector<std::uint8_t> codebooks(n / 64);
  qp::registry::for_each_type(qp::registry::formula_types, [&](auto tag) {
    using formula = decltype(tag);
    const auto& f = qp::schemes::formula_of(formula::id);
    // QPOLICY_QUANT_BENCH_ONLY=NAME times one formula (for a profiler).
    if (const char* only = std::getenv("QPOLICY_QUANT_BENCH_ONLY"); only && f.name != std::string_view(only)) return;
    void* scales = f.scales == qp::schemes::scale_format::f32 ? static_cast<void*>(s.data()) : sb.data();
    const qp::quantized_outputs out{q.data(), scales, second.data(), codebooks.data()};
    // LUT-B fits a codebook per tile (Lloyd, 16 iterations from 3 starts): a slice of the matrix, and
    // its cost per tile besides the throughput.
    const std::int64_t slice = f.tiled() ? 256 : rows;
    const qpolicy::input_view xs{w.data(), qpolicy::element::bf16, slice, cols};
    const double part = static_cast<double>(slice) / static_cast<double>(rows);
    // memcpy again in turns with the kernel: this VM's memory speed drifts by up to 1.5x within a minute.
    const auto [fast, copy_s] = best_seconds_alternating(f.tiled() ? 3 : runs, [&] { qp::cpu::quantize<formula>(xs, out); },
                                                         [&] { std::memcpy(copy.data(), w.data(), n * 2); });
    const double slow = best_seconds(f.tiled() ? 1 : 2, [&] { ref::quantize<formula>(xs, out); });
    fmt::print("bench: cpu_{} {:.2f} GB/s vs memcpy {:.2f}x\n", f.name, part * bytes / fast / 1e9, part * copy_s / fast);
    if (!f.tiled()) {
      // The decode back to bf16 (quantize-tensor --dequantize, the requantization's first step), as bf16 bytes out.
      const qp::cpu::stored_tensors stored{q.data(), scales, second.data(), nullptr, rows, cols, false};
      std::vector<std::uint16_t> back(n);
      const auto [decode, decode_copy_s] =
          best_seconds_alternating(runs, [&] { qp::cpu::dequantize(formula::id, stored, qpolicy::element::bf16, back.data()); },
                                   [&] { std::memcpy(copy.data(), w.data(), n * 2); });
      fmt::print("bench: cpu_dequantize_{} {:.2f} GB/s vs memcpy {:.2f}x\n", f.name, bytes / decode / 1e9, decode_copy_s / decode);
    }
    fmt::print("bench: cpu_{}_speedup {:.2f} x vs scalar_reference {:.2f}x\n", f.name, slow / fast, slow / fast);
    if (f.tiled()) {
      const double tiles = static_cast<double>(qp::schemes::scale_count(f, slice, cols));  // one scale per tile
      fmt::print("bench: cpu_{}_tile {:.1f} us per tile per thread ({} threads)\n", f.name,
                 fast / tiles * 1e6 * std::thread::hardware_concurrency(), std::thread::hardware_concurrency());
    }
  });
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if (__builtin_cpu_supports("avx512f")) {
    // The rotation's bound: 32 FMAs per element on every core, as bf16 input bytes per second.
    const double fma = fma_lanes_per_second(), bound = fma / 32 * 2 * std::thread::hardware_concurrency();
    fmt::print("bench: cpu_fma_peak {:.1f} G lane-FMA/s per core; Hadamard-32 bound {:.2f} GB/s vs memcpy {:.2f}x\n", fma / 1e9,
               bound / 1e9, bound * memcpy_s / bytes);
  }
#endif
  // The weight decode of the weight-only GEMM: LUT-B's codebook lookups against MXFP4's e2m1 decode
  // (the MXFP4 path's), same matrix, same threads.
  const auto mx = qp::cpu::detail::quantize_matrix<qp::formulas::mxfp4_even>(x, 0);
  const auto lut = qp::cpu::detail::quantize_matrix<qp::formulas::lut_b>({w.data(), qpolicy::element::bf16, 512, cols}, 0);
  qp::cpu::quantized_matrix lut_full = lut;  // the tiles repeated over the whole matrix: the decode's cost does not depend on their values
  lut_full.rows = rows;
  for (int r = 1; r < rows / 512; ++r) {
    lut_full.codes.insert(lut_full.codes.end(), lut.codes.begin(), lut.codes.end());
    lut_full.block_scales.insert(lut_full.block_scales.end(), lut.block_scales.begin(), lut.block_scales.end());
    lut_full.codebook.insert(lut_full.codebook.end(), lut.codebook.begin(), lut.codebook.end());
  }
  const double mx_s = best_seconds(runs, [&] { (void)qp::cpu::detail::decode_weights<qp::schemes::formula::mxfp4_even>(mx, 0); });
  const double lut_s = best_seconds(runs, [&] { (void)qp::cpu::detail::decode_weights<qp::schemes::formula::lut_b>(lut_full, 0); });
  fmt::print("bench: cpu_lut_b_decode {:.2f} Gweights/s vs mxfp4_decode {:.2f}x\n", double(n) / lut_s / 1e9, mx_s / lut_s);
  return 0;
}
