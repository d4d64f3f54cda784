// GPU suite: the CUDA FP8 GEMMs against the CPU reference GEMMs. The fallback kernel must equal the
// reference bit for bit (same float32 operations in the same order, bf16 rounding at the end);
// cuBLASLt must stay within spec §10's bound (one bf16 ulp plus K * 2^-24 * T). Every scaling pair,
// with and without bias, on shapes cuBLASLt takes and on shapes it refuses (which then fall back).
// Exits 77 (skipped) with the reason when there is no usable device.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "qpolicy/kernels/cpu/gemm_reference.hpp"
#include "qpolicy/kernels/cuda/gemm.hpp"
#include "qpolicy/kernels/cuda/device_info.hpp"
#include "../support/random_operands.hpp"
#include "device_buffer.hpp"

namespace qp = qpolicy;
namespace fp8 = qpolicy::fp8;
using qpolicy::test::random_codes;
using qpolicy::test::random_scales;
namespace cuda = qpolicy::cuda;
using qpolicy::test::device_buffer;
using qpolicy::test::fail;
using qpolicy::test::failures;

namespace {


struct pairing {
  fp8::activation_quant act;
  fp8::weight_scales weights;
  bool cublaslt_expected;  // on sm_90, for a shape cuBLASLt's constraints allow
};

void run_case(cuda::gemm_runner& runner, std::int64_t m, std::int64_t n, std::int64_t k, const pairing& pr, bool bias,
              std::mt19937& rng, int sm) {
  const bool blocks = pr.weights == fp8::weight_scales::block_128x128;
  const std::string name = "M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k) + " " +
                           std::string(fp8::name_of(pr.act)) + " x " + std::string(fp8::name_of(pr.weights)) +
                           (bias ? " +bias" : "");
  const auto a = random_codes(static_cast<std::size_t>(m * k), rng), w = random_codes(static_cast<std::size_t>(n * k), rng);
  const std::int64_t kb = k / 128, nb = (n + 127) / 128, stride = fp8::cublaslt_block_scale_stride(k);
  std::vector<float> sa, sw, sa_device, sw_device;
  std::vector<float> expected(static_cast<std::size_t>(m * n));
  if (blocks) {
    sa = random_scales(static_cast<std::size_t>(m * kb), rng);  // row-major [M, K/128] for the reference
    sw = random_scales(static_cast<std::size_t>(nb * kb), rng);
    sa_device.resize(sa.size());
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t g = 0; g < kb; ++g) sa_device[static_cast<std::size_t>(g * m + i)] = sa[static_cast<std::size_t>(i * kb + g)];
    sw_device.assign(static_cast<std::size_t>(nb * stride), 0.0f);
    for (std::int64_t r = 0; r < nb; ++r)
      for (std::int64_t g = 0; g < kb; ++g) sw_device[static_cast<std::size_t>(r * stride + g)] = sw[static_cast<std::size_t>(r * kb + g)];
    qp::cpu::reference::gemm_blocked(a.data(), sa.data(), w.data(), sw.data(), m, n, k, expected.data());
  } else {
    const bool a_rows = pr.act == fp8::activation_quant::per_token, w_rows = pr.weights == fp8::weight_scales::per_channel;
    sa = random_scales(static_cast<std::size_t>(a_rows ? m : 1), rng);
    sw = random_scales(static_cast<std::size_t>(w_rows ? n : 1), rng);
    sa_device = sa;
    sw_device = sw;
    qp::cpu::reference::gemm_scaled(a.data(), sa.data(), a_rows, w.data(), sw.data(), w_rows, m, n, k, expected.data());
  }
  std::vector<std::uint16_t> bias_bits(static_cast<std::size_t>(n));
  for (auto& b : bias_bits) b = fp8::to_bf16(static_cast<float>(static_cast<int>(rng() % 200) - 100) / 64.0f);
  std::vector<std::uint16_t> want(expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    want[i] = fp8::to_bf16(bias ? expected[i] + fp8::from_bf16(bias_bits[i % static_cast<std::size_t>(n)]) : expected[i]);

  device_buffer<std::uint8_t> da(a), dw(w);
  device_buffer<float> dsa(sa_device), dsw(sw_device);
  device_buffer<std::uint16_t> dbias(bias_bits), dout(expected.size());
  const cuda::gemm_problem p{m, n, k, pr.act, pr.weights, bias};
  const cuda::gemm_operands op{da.ptr, dsa.ptr, dw.ptr, dsw.ptr, blocks ? stride : 0, bias ? dbias.ptr : nullptr, dout.ptr};

  // The fallback kernel: bit for bit.
  runner.run(p, op, {}, cuda::gemm_backend::fallback);
  cudaDeviceSynchronize();
  const auto got = dout.get(expected.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      fail(name + ": fallback output " + std::to_string(i) + " is " + std::to_string(fp8::from_bf16(got[i])) + ", the reference " +
           std::to_string(fp8::from_bf16(want[i])));
      break;
    }

  // cuBLASLt: within the bound, or a stated reason for falling back.
  const auto backend = runner.run(p, op);
  cudaDeviceSynchronize();
  const bool allowed = cuda::cublaslt_can_implement(p, op, sm).empty();
  if (backend == cuda::gemm_backend::fallback) {
    if (runner.last_fallback_reason().empty()) fail(name + ": fell back without a reason");
    if (allowed && pr.cublaslt_expected && sm == 90) fail(name + ": cuBLASLt refused it: " + runner.last_fallback_reason());
    std::printf("  %s: fallback (%s)\n", name.c_str(), runner.last_fallback_reason().c_str());
    return;
  }
  const auto lt = dout.get(expected.size());
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double ref = 0, t = 0;
      for (std::int64_t x = 0; x < k; ++x) {
        const double prod = double(fp8::decode(a[i * k + x])) * fp8::decode(w[j * k + x]);
        double s;
        if (blocks) s = double(sa[static_cast<std::size_t>(i * kb + x / 128)]) * sw[static_cast<std::size_t>((j / 128) * kb + x / 128)];
        else s = double(sa[pr.act == fp8::activation_quant::per_token ? i : 0]) * sw[pr.weights == fp8::weight_scales::per_channel ? j : 0];
        ref += prod * s;
        t += std::fabs(prod * s);
      }
      if (bias) ref += fp8::from_bf16(bias_bits[static_cast<std::size_t>(j)]);
      const double ulp = ref == 0 ? 0 : std::ldexp(1.0, std::ilogb(ref) - 7);
      const double bound = ulp + static_cast<double>(k) * std::ldexp(1.0, -24) * t + 1e-30;
      const double v = fp8::from_bf16(lt[static_cast<std::size_t>(i * n + j)]);
      if (!(std::fabs(v - ref) <= bound)) {
        fail(name + ": cuBLASLt output (" + std::to_string(i) + ", " + std::to_string(j) + ") is " + std::to_string(v) +
             ", the reference " + std::to_string(ref) + " (bound " + std::to_string(bound) + ")");
        return;
      }
    }
  std::printf("  %s: cuBLASLt within the bound\n", name.c_str());
}

}  // namespace

int main() {
  if (!qpolicy::test::have_device("GPU GEMM tests")) return 77;
  int device = 0, major = 0, minor = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  const int sm = major * 10 + minor;
  cuda::gemm_runner runner;
  std::mt19937 rng(3);
  using A = fp8::activation_quant;
  using W = fp8::weight_scales;
  const pairing pairings[] = {{A::per_tensor, W::per_tensor, true},  {A::per_token, W::per_channel, true},
                              {A::per_token, W::per_tensor, false},  {A::per_tensor, W::per_channel, false},
                              {A::group_128, W::block_128x128, true}};
  const std::int64_t shapes[][3] = {{64, 256, 512}, {128, 384, 1024}, {4, 2112, 7168 / 4}, {7, 136, 256}, {16, 100, 384}};
  for (const auto& s : shapes)
    for (const auto& pr : pairings)
      for (bool bias : {false, true}) run_case(runner, s[0], s[1], s[2], pr, bias, rng, sm);
  // A malformed problem is refused before any launch.
  try {
    runner.run({8, 128, 200, A::group_128, W::block_128x128, false}, {}, {nullptr, "model.layers.0.mlp.down_proj"});
    fail("no error for K=200 with 128x128 blocks");
  } catch (const std::invalid_argument& e) {
    const std::string want = "layer model.layers.0.mlp.down_proj: GEMM operands A, its scales, W, its scales and out are required";
    if (e.what() != want) fail(std::string("unexpected message: ") + e.what());
  }
  if (failures) {
    std::printf("%d failure(s)\n", failures);
    return 1;
  }
  std::printf("all CUDA GEMMs agree with the CPU reference\n");
  return 0;
}
