// GPU suite: the CUDA forward passes against the CPU ones. With the fallback GEMM a linear layer must
// give the CPU's bits; a MoE layer too, up to SiLU's expf (the GPU's and glibc's may differ by an
// ulp, which can move a bf16 rounding). With cuBLASLt or the grouped MoE kernel (other summation
// orders) the outputs stay within 2% of the CPU's. Every scheme, on the CPU tests' shapes. Exits 77 without a device.
#include <cmath>
#include <exception>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "qpolicy/kernels/cuda/forward.hpp"
#include "qpolicy/kernels/cuda/grouped_gemm.hpp"
#include "qpolicy/kernels/cuda/device_info.hpp"
#include "device_buffer.hpp"
#include "../support/moe_routing.hpp"
#include "../support/random_operands.hpp"

namespace qp = qpolicy;
namespace fp8 = qpolicy::fp8;
namespace cpu = qpolicy::cpu;
namespace cuda = qpolicy::cuda;
using qpolicy::test::device_buffer;
using qpolicy::test::fail;
using qpolicy::test::failures;
using qpolicy::test::random_bf16;

namespace {

/// ||a - b|| / ||b|| over bf16 values.
double relative_difference(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
  return qpolicy::test::relative_error(a, qpolicy::test::widen(b));
}

template <class Scheme>
void check_linear(cuda::forward_context& ctx, const char* scheme, std::int64_t n, std::int64_t k, std::mt19937& rng) {
  const std::int64_t rows = 16;
  const std::string name = std::string(scheme) + " linear [" + std::to_string(n) + ", " + std::to_string(k) + "]";
  const auto w = random_bf16(static_cast<std::size_t>(n * k), 0.02f, rng), x = random_bf16(static_cast<std::size_t>(rows * k), 1.0f, rng);
  std::vector<float> bias(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(static_cast<int>(i % 9) - 4) / 64.0f;  // bf16-exact
  const auto layer = cpu::quantize_linear<Scheme>({w.data(), qpolicy::element::bf16, n, k}, bias.data());
  std::vector<std::uint16_t> want(static_cast<std::size_t>(rows * n));
  cpu::linear_forward<Scheme>(layer, {x.data(), qpolicy::element::bf16, rows, k}, want.data());
  const auto dev = cuda::upload(layer);
  device_buffer<std::uint16_t> dx(x), dout(want.size());
  ctx.prefer = cuda::gemm_backend::fallback;
  cuda::linear_forward(ctx, dev, dx.ptr, rows, dout.ptr);
  if (dout.get(want.size()) != want) fail(name + ": the fallback path differs from the CPU pass");
  ctx.prefer = cuda::gemm_backend::cublaslt;
  const auto used = cuda::linear_forward(ctx, dev, dx.ptr, rows, dout.ptr);
  const double d = relative_difference(dout.get(want.size()), want);
  std::printf("  %s: %s, %.2e from the CPU pass\n", name.c_str(), used == cuda::gemm_backend::cublaslt ? "cuBLASLt" : "fallback", d);
  if (!(d <= 0.02)) fail(name + ": " + std::to_string(d) + " from the CPU pass");
  try {
    cuda::linear_forward(ctx, dev, dx.ptr, 0, dout.ptr);  // no rows: nothing to do, as on the CPU
  } catch (const std::exception& e) {
    fail(name + ": 0 rows threw: " + e.what());
  }
}

template <class Scheme>
void check_moe(cuda::forward_context& ctx, const char* scheme, std::mt19937& rng) {
  const std::int64_t experts = 16, hidden = 512, inter = 192, top_k = 4, tokens = 64;
  const std::string name = std::string(scheme) + " MoE";
  const auto w13 = random_bf16(static_cast<std::size_t>(experts * 2 * inter * hidden), 0.03f, rng);
  const auto w2 = random_bf16(static_cast<std::size_t>(experts * hidden * inter), 0.03f, rng);
  const auto x = random_bf16(static_cast<std::size_t>(tokens * hidden), 1.0f, rng);
  const qpolicy::test::strided_routing routed(tokens, top_k, experts, 5, 3);
  const cpu::routing route = routed.view();
  const auto layer = cpu::quantize_moe<Scheme>({w13.data(), qpolicy::element::bf16, experts * 2 * inter, hidden},
                                               {w2.data(), qpolicy::element::bf16, experts * hidden, inter}, experts);
  std::vector<std::uint16_t> want(static_cast<std::size_t>(tokens * hidden));
  cpu::moe_forward<Scheme>(layer, {x.data(), qpolicy::element::bf16, tokens, hidden}, route, want.data());
  const auto dev = cuda::upload(layer);
  device_buffer<std::uint16_t> dx(x), dout(want.size());
  struct run {
    cuda::gemm_backend prefer;
    cuda::moe_kernel moe;
    const char* what;
    double bound;
  };
  const run runs[] = {{cuda::gemm_backend::fallback, cuda::moe_kernel::loop, "loop, fallback GEMMs", 5e-3},
                      {cuda::gemm_backend::cublaslt, cuda::moe_kernel::loop, "loop, cuBLASLt where it can", 0.02},
                      {cuda::gemm_backend::cublaslt, cuda::moe_kernel::grouped, "grouped kernel", 0.02}};
  for (const run& r : runs) {
    ctx.prefer = r.prefer;
    ctx.moe = r.moe;
    const auto ran = cuda::moe_forward(ctx, dev, dx.ptr, tokens, route, dout.ptr);
    const double d = relative_difference(dout.get(want.size()), want);
    std::printf("  %s (%s): %.2e from the CPU pass\n", name.c_str(), r.what, d);
    if (ran != r.moe && cuda::current_sm() >= 89) fail(name + ": asked for " + r.what + ", ran the loop: " + ctx.moe_loop_reason);
    if (!(d <= r.bound)) fail(name + " (" + r.what + "): " + std::to_string(d) + " from the CPU pass");
    try {
      cuda::moe_forward(ctx, dev, dx.ptr, 0, route, dout.ptr);  // no tokens: nothing to do, as on the CPU
    } catch (const std::exception& e) {
      fail(name + " (" + r.what + "): 0 tokens threw: " + e.what());
    }
  }
}

}  // namespace

int main() {
  if (!qpolicy::test::have_device("GPU forward tests")) return 77;
  cuda::forward_context ctx;
  std::mt19937 rng(9);
  const std::int64_t shapes[][2] = {{1536, 1024}, {1024, 3584}, {1280, 512}};
  for (const auto& s : shapes) {
    check_linear<qp::fp8_per_tensor>(ctx, "fp8_per_tensor", s[0], s[1], rng);
    check_linear<qp::fp8_per_channel>(ctx, "fp8_per_channel", s[0], s[1], rng);
    check_linear<qp::fp8_per_block>(ctx, "fp8_per_block", s[0], s[1], rng);
  }
  check_moe<qp::fp8_per_tensor>(ctx, "fp8_per_tensor", rng);
  check_moe<qp::fp8_per_channel>(ctx, "fp8_per_channel", rng);
  check_moe<qp::fp8_per_block>(ctx, "fp8_per_block", rng);
  if (failures) {
    std::printf("%d failure(s)\n", failures);
    return 1;
  }
  std::printf("all CUDA forward passes agree with the CPU ones\n");
  return 0;
}
