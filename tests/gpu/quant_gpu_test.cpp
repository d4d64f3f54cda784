// GPU suite: every CUDA quantization kernel against the CPU reference, bit for bit, on random shapes
// with special values (and a tensor over 2^31 elements when the device has the memory). Exits 77
// (skipped) with the reason when there is no usable device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cpu/reference.hpp"
#include "kernels/cuda/quant.hpp"
#include "kernels/cuda/device_info.hpp"
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

std::vector<std::uint16_t> random_bf16(std::mt19937& rng, std::size_t n) {
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

}  // namespace

int main() {
  if (!qpolicy::test::have_device("GPU kernel tests")) return 77;
  std::mt19937 rng(11);
  for (int round = 0; round < 40; ++round) {
    const std::int64_t rows = 1 + rng() % 300, cols = round % 2 ? 128 * (1 + rng() % 6) : 1 + rng() % 700;
    const auto n = static_cast<std::size_t>(rows * cols);
    const auto host = random_bf16(rng, n);
    device_buffer<std::uint16_t> in(n);
    cudaMemcpy(in.ptr, host.data(), n * 2, cudaMemcpyHostToDevice);
    const fp8::input_view hx{host.data(), fp8::element::bf16, rows, cols}, dx{in.ptr, fp8::element::bf16, rows, cols};
    device_buffer<std::uint8_t> q(n);
    device_buffer<float> s(static_cast<std::size_t>(std::max<std::int64_t>(rows, 8) * 8 + 64));
    device_buffer<std::uint32_t> scratch(1);
    std::vector<std::uint8_t> qr(n);
    std::vector<float> sr(static_cast<std::size_t>(rows));

    qp::cuda::weight_kernel<qp::fp8_per_tensor>::run(dx, q.ptr, s.ptr, scratch.ptr);
    ref::weight_per_tensor(hx, qr.data(), sr.data());
    compare(q.get(n), qr, s.get(1), {sr[0]}, "weight per-tensor", round);

    qp::cuda::weight_kernel<qp::fp8_per_channel>::run(dx, q.ptr, s.ptr);
    ref::weight_per_channel(hx, qr.data(), sr.data());
    compare(q.get(n), qr, s.get(sr.size()), sr, "weight per-channel", round);

    qp::cuda::activation_kernel<qp::fp8_per_token>::run(dx, q.ptr, s.ptr);
    ref::dynamic_per_token(hx, qr.data(), sr.data());
    compare(q.get(n), qr, s.get(sr.size()), sr, "per-token", round);

    qp::cuda::activation_kernel<qp::fp8_per_tensor_dynamic>::run(dx, q.ptr, s.ptr, scratch.ptr);
    ref::dynamic_per_tensor(hx, qr.data(), sr.data());
    compare(q.get(n), qr, s.get(1), {sr[0]}, "dynamic per-tensor", round);

    const std::size_t blocks = static_cast<std::size_t>(((rows + 127) / 128) * ((cols + 127) / 128));
    device_buffer<float> bs(blocks);
    std::vector<float> br(blocks);
    const ref::block_options bo{round % 4 == 1, round % 4 == 3};
    qp::cuda::weight_kernel<qp::fp8_per_block>::run(dx, bo, q.ptr, bs.ptr);
    ref::block_128x128(hx, bo, qr.data(), br.data());
    compare(q.get(n), qr, bs.get(blocks), br, "128x128 blocks", round);

    if (cols % 128 == 0)
      for (auto layout : {fp8::scale_layout::row_major, fp8::scale_layout::column_major, fp8::scale_layout::column_major_tma}) {
        const ref::group_options go{128, round % 3 == 0, layout};
        const auto count = static_cast<std::size_t>(fp8::scale_storage(layout, rows, cols / 128));
        device_buffer<float> gs(count);
        std::vector<float> gr(count);
        qp::cuda::activation_kernel<qp::fp8_per_block_dynamic>::run(dx, go, q.ptr, gs.ptr);
        ref::per_token_group(hx, go, qr.data(), gr.data());
        compare(q.get(n), qr, gs.get(count), gr, "1x128 groups", round);
      }
  }
  if (cudaDeviceSynchronize() != cudaSuccess) ++failures;
  std::printf("%s: %d mismatches\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
