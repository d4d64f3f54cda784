// GPU suite: the CUDA layers of every scheme of the registry (each with every activation its layers
// take) against the CPU ones, on the CPU tests' shapes. Scaled FP8 layers: with the fallback GEMM a
// linear layer gives the CPU's bits, a MoE layer too up to SiLU's expf (the GPU's and glibc's may differ
// by an ulp, which can move a bf16 rounding); with cuBLASLt or the grouped MoE kernel (other summation
// orders) the outputs stay within 2% of the CPU's. Weight-only layers: the same operands, other
// summation orders and bf16 roundings of intermediates, within 1%. Builds with nvcc alone. Exits 77
// (skipped) with the reason when there is no usable device.
#include <cmath>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../support/moe_routing.hpp"
#include "../support/random_operands.hpp"
#include "../support/type_lists.hpp"
#include "device_buffer.hpp"
#include "qpolicy/kernels/cuda/device_info.hpp"
#include "qpolicy/kernels/cuda/forward.hpp"

namespace qp = qpolicy;
namespace cpu = qpolicy::cpu;
namespace cuda = qpolicy::cuda;
using qpolicy::test::device_buffer;
using qpolicy::test::fail;
using qpolicy::test::failures;
using qpolicy::test::random_bf16;

namespace {

/// ||a - b|| / ||b|| over bf16 values, printed, and a failure past `bound`.
void compare(const std::string& name, const std::vector<std::uint16_t>& got, const std::vector<std::uint16_t>& want, double bound) {
  const double d = qpolicy::test::relative_error(got, qpolicy::test::widen(want));
  std::printf("  %s: %.2e from the CPU pass\n", name.c_str(), d);
  if (!(d <= bound)) fail(name + ": " + std::to_string(d) + " from the CPU pass");
}

/// "fp8_per_block with fp8_per_block_dynamic", "mxfp4" for a layer's scheme and activation.
template <class Pair>
std::string label() {
  std::string out(Pair::scheme::name);
  if constexpr (!cpu::is_weight_only<typename Pair::scheme>) out += " with " + std::string(Pair::activation::name);
  return out;
}

template <class Pair>
void check_linear(cuda::forward_context& ctx, std::int64_t n, std::int64_t k, std::mt19937& rng) {
  using Scheme = typename Pair::scheme;
  const std::int64_t rows = 16;
  const std::string name = label<Pair>() + " linear [" + std::to_string(n) + ", " + std::to_string(k) + "]";
  const auto w = random_bf16(static_cast<std::size_t>(n * k), 0.02f, rng), x = random_bf16(static_cast<std::size_t>(rows * k), 1.0f, rng);
  std::vector<float> bias(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(static_cast<int>(i % 9) - 4) / 64.0f;  // bf16-exact
  const auto layer = cpu::quantize_linear<Scheme, typename Pair::activation>({w.data(), qpolicy::element::bf16, n, k}, bias.data());
  std::vector<std::uint16_t> want(static_cast<std::size_t>(rows * n));
  cpu::linear_forward(layer, {x.data(), qpolicy::element::bf16, rows, k}, want.data());
  const auto dev = cuda::upload(layer);
  device_buffer<std::uint16_t> dx(x), dout(want.size());
  if constexpr (cpu::is_weight_only<Scheme>) {
    cuda::linear_forward(ctx, dev, dx.ptr, rows, dout.ptr);
    compare(name, dout.get(want.size()), want, 0.01);
  } else {
    ctx.prefer = cuda::gemm_backend::fallback;
    cuda::linear_forward(ctx, dev, dx.ptr, rows, dout.ptr);
    if (dout.get(want.size()) != want) fail(name + ": the fallback path differs from the CPU pass");
    ctx.prefer = cuda::gemm_backend::cublaslt;
    const auto used = cuda::linear_forward(ctx, dev, dx.ptr, rows, dout.ptr);
    compare(name + (used == cuda::gemm_backend::cublaslt ? " (cuBLASLt)" : " (fallback)"), dout.get(want.size()), want, 0.02);
  }
  try {
    cuda::linear_forward(ctx, dev, dx.ptr, 0, dout.ptr);  // no rows: nothing to do, as on the CPU
  } catch (const std::exception& e) {
    fail(name + ": 0 rows threw: " + e.what());
  }
}

template <class Pair>
void check_moe(cuda::forward_context& ctx, std::mt19937& rng) {
  using Scheme = typename Pair::scheme;
  constexpr auto& row = qp::schemes::contract_of(Scheme::id);
  // I = 176 where the scheme takes or pads it (MXFP4 pads to 192, the FP8 blocks to 256), else 192.
  const std::int64_t experts = 16, hidden = 512, top_k = 4, tokens = 64;
  const std::int64_t inter = row.moe_pads || 176 % row.moe_multiple == 0 ? 176 : 192;
  const std::string name = label<Pair>() + " MoE (I = " + std::to_string(inter) + ")";
  const auto w13 = random_bf16(static_cast<std::size_t>(experts * 2 * inter * hidden), 0.03f, rng);
  const auto w2 = random_bf16(static_cast<std::size_t>(experts * hidden * inter), 0.03f, rng);
  const auto x = random_bf16(static_cast<std::size_t>(tokens * hidden), 1.0f, rng);
  const qpolicy::test::strided_routing routed(tokens, top_k, experts, 5, 3);
  const cpu::routing route = routed.view();
  const auto layer = cpu::quantize_moe<Scheme, typename Pair::activation>({w13.data(), qpolicy::element::bf16, experts * 2 * inter, hidden},
                                                                          {w2.data(), qpolicy::element::bf16, experts * hidden, inter}, experts);
  std::vector<std::uint16_t> want(static_cast<std::size_t>(tokens * hidden));
  cpu::moe_forward(layer, {x.data(), qpolicy::element::bf16, tokens, hidden}, route, want.data());
  const auto dev = cuda::upload(layer);
  device_buffer<std::uint16_t> dx(x), dout(want.size());
  if constexpr (cpu::is_weight_only<Scheme>) {
    cuda::moe_forward(ctx, dev, dx.ptr, tokens, route, dout.ptr);
    compare(name, dout.get(want.size()), want, 0.01);
  } else {
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
      compare(name + " (" + r.what + ")", dout.get(want.size()), want, r.bound);
      if (ran != r.moe && cuda::current_sm() >= 89) fail(name + ": asked for " + r.what + ", ran the loop: " + ctx.moe_loop_reason);
    }
  }
  try {
    cuda::moe_forward(ctx, dev, dx.ptr, 0, route, dout.ptr);  // no tokens: nothing to do, as on the CPU
  } catch (const std::exception& e) {
    fail(name + ": 0 tokens threw: " + e.what());
  }
}

}  // namespace

int main() {
  if (!qpolicy::test::have_device("GPU forward tests")) return 77;
  cuda::forward_context ctx;
  std::mt19937 rng(9);
  const std::int64_t shapes[][2] = {{1536, 1024}, {1024, 3584}, {1280, 512}};
  try {
    for (const auto& s : shapes)
      std::apply([&](auto... pair) { (check_linear<decltype(pair)>(ctx, s[0], s[1], rng), ...); }, qpolicy::test::linear_layer_pairs{});
    std::apply([&](auto... pair) { (check_moe<decltype(pair)>(ctx, rng), ...); }, qpolicy::test::moe_layer_pairs{});
  } catch (const std::exception& e) {
    fail(std::string("threw: ") + e.what());
  }
  if (failures) {
    std::printf("%d failure(s)\n", failures);
    return 1;
  }
  std::printf("all CUDA layers agree with the CPU ones\n");
  return 0;
}
