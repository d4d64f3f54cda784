// GPU suite: the CUDA forward passes of the low-precision schemes (weight-only GEMMs after each
// scheme's activation treatment) against the CPU ones, on the CPU tests' shapes: the same operands,
// other summation orders and bf16 roundings of intermediates, so the outputs stay within 1% of the
// CPU's. Builds with nvcc alone. Exits 77 (skipped) with the reason when there is no usable device.
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
#include "qpolicy/kernels/cuda/low_precision_forward.hpp"

namespace qp = qpolicy;
namespace fp8 = qpolicy::fp8;
namespace cpu = qpolicy::cpu;
namespace cuda = qpolicy::cuda;
using qpolicy::test::device_buffer;
using qpolicy::test::fail;
using qpolicy::test::failures;
using qpolicy::test::random_bf16;

namespace {

void report(const std::string& name, const std::vector<std::uint16_t>& got, const std::vector<std::uint16_t>& want) {
  const double d = qpolicy::test::relative_error(got, qpolicy::test::widen(want));
  std::printf("  %s: %.2e from the CPU pass\n", name.c_str(), d);
  if (!(d <= 0.01)) fail(name + ": " + std::to_string(d) + " from the CPU pass");
}

template <class Scheme>
void check_linear(cuda::forward_context& ctx, std::int64_t n, std::int64_t k, std::mt19937& rng) {
  const std::int64_t rows = 16;
  const auto w = random_bf16(static_cast<std::size_t>(n * k), 0.02f, rng), x = random_bf16(static_cast<std::size_t>(rows * k), 1.0f, rng);
  std::vector<float> bias(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(static_cast<int>(i % 9) - 4) / 64.0f;  // bf16-exact
  const auto layer = cpu::quantize_linear<Scheme>({w.data(), qpolicy::element::bf16, n, k}, bias.data());
  std::vector<std::uint16_t> want(static_cast<std::size_t>(rows * n));
  cpu::linear_forward(layer, {x.data(), qpolicy::element::bf16, rows, k}, want.data());
  const auto dev = cuda::upload(layer);
  device_buffer<std::uint16_t> dx(x), dout(want.size());
  cuda::linear_forward(ctx, dev, dx.ptr, rows, dout.ptr);
  report(std::string(Scheme::name) + " linear [" + std::to_string(n) + ", " + std::to_string(k) + "]", dout.get(want.size()), want);
}

template <class Scheme>
void check_moe(cuda::forward_context& ctx, std::mt19937& rng) {
  const std::int64_t experts = 16, hidden = 512, inter = 176, top_k = 4, tokens = 64;  // MXFP4 pads I to 192; MXFP8 takes 192
  const std::int64_t i = Scheme::id == qp::method::mxfp8 ? 192 : inter;
  const auto w13 = random_bf16(static_cast<std::size_t>(experts * 2 * i * hidden), 0.03f, rng);
  const auto w2 = random_bf16(static_cast<std::size_t>(experts * hidden * i), 0.03f, rng);
  const auto x = random_bf16(static_cast<std::size_t>(tokens * hidden), 1.0f, rng);
  const qpolicy::test::strided_routing routed(tokens, top_k, experts, 5, 3);
  const cpu::routing route = routed.view();
  const auto layer = cpu::quantize_moe<Scheme>({w13.data(), qpolicy::element::bf16, experts * 2 * i, hidden},
                                               {w2.data(), qpolicy::element::bf16, experts * hidden, i}, experts);
  std::vector<std::uint16_t> want(static_cast<std::size_t>(tokens * hidden));
  cpu::moe_forward(layer, {x.data(), qpolicy::element::bf16, tokens, hidden}, route, want.data());
  const auto dev = cuda::upload(layer);
  device_buffer<std::uint16_t> dx(x), dout(want.size());
  cuda::moe_forward(ctx, dev, dx.ptr, tokens, route, dout.ptr);
  report(std::string(Scheme::name) + " MoE (I = " + std::to_string(i) + ")", dout.get(want.size()), want);
}

template <class... Schemes>
void check_all(cuda::forward_context& ctx, std::mt19937& rng, std::tuple<Schemes...>*) {
  const std::int64_t shapes[][2] = {{1536, 1024}, {1024, 3584}, {1280, 512}};
  (
      [&] {
        if constexpr (qp::schemes::contract_of(Schemes::id).linear)
          for (const auto& s : shapes) check_linear<Schemes>(ctx, s[0], s[1], rng);
        check_moe<Schemes>(ctx, rng);
      }(),
      ...);
}

}  // namespace

int main() {
  if (!qpolicy::test::have_device("GPU low-precision forward tests")) return 77;
  cuda::forward_context ctx;
  std::mt19937 rng(31);
  try {
    check_all(ctx, rng, static_cast<qpolicy::test::weight_only_schemes*>(nullptr));
  } catch (const std::exception& e) {
    fail(std::string("threw: ") + e.what());
  }
  std::printf("%s: %d failures\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
