// A program that uses an installed qpolicy, through its public headers only (docs/api.md): its own
// model and policy checked by the compiler, the same plan from JSON at run time, and a CPU forward
// pass of every layer through the kernel specialized for the layer's scheme. Built by
// examples/consumer-cmake (find_package) and examples/consumer-meson (pkg-config) against the
// installed tree, with -Werror -Wall -Wextra; prints one line per layer and exits 0 when every
// quantized layer's output is within its scheme's error of the unquantized one.
#include <qpolicy/qpolicy.hpp>
#include <qpolicy/kernels/cpu/forward.hpp>
#include <qpolicy/kernels/cpu/weight_only_forward.hpp>
#include <qpolicy/version.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace qp = qpolicy;

// Two blocks of attention and MLP projections (small, so that the CPU runs them in milliseconds).
constexpr auto block = qp::block(qp::linear("layers.{i}.attn.qkv_proj", "QKVParallelLinear", {384, 256}),
                                 qp::linear("layers.{i}.attn.o_proj", "RowParallelLinear", {256, 256}),
                                 qp::linear("layers.{i}.mlp.up_proj", "ColumnParallelLinear", {512, 256}),
                                 qp::linear("layers.{i}.mlp.down_proj", "RowParallelLinear", {256, 512}));
constexpr auto tiny_model = qp::model(qp::repeat<2>(block), qp::other("lm_head", "ParallelLMHead"));

// A scheme per kind of projection; block 0's attention stays in bf16.
using policy = qp::quant_config<qp::targets<qp::target<"re:layers\\.1\\.attn\\.qkv_proj", qp::fp8_per_block>,
                                            qp::target<"re:.*o_proj", qp::fp8_per_channel>,
                                            qp::target<"re:.*up_proj", qp::mxfp8>,
                                            qp::target<"re:.*down_proj", qp::fp8_per_tensor>>>;
constexpr auto& plan = qp::plan_for<policy, tiny_model>;
static_assert(plan["layers.0.attn.qkv_proj"].decided == qp::method::unquantized);
static_assert(plan["layers.1.attn.qkv_proj"].decided == qp::method::fp8_per_block);
static_assert(plan["layers.0.mlp.up_proj"].decided == qp::method::mxfp8);

namespace {

std::vector<std::uint16_t> random_bf16(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) x = qp::fp8::to_bf16(d(rng));
  return v;
}

/// Quantizes one layer's weight for Scheme with the kernel specialized for it, runs 4 tokens through it
/// and returns the largest error against the unquantized layer, relative to the output's magnitude.
template <class Scheme>
double run_layer(std::int64_t out_features, std::int64_t in_features, std::mt19937& rng) {
  const auto w = random_bf16(static_cast<std::size_t>(out_features * in_features), rng);
  const auto x = random_bf16(static_cast<std::size_t>(4 * in_features), rng);
  const qp::input_view wv{w.data(), qp::element::bf16, out_features, in_features};
  const qp::input_view xv{x.data(), qp::element::bf16, 4, in_features};
  std::vector<float> want(static_cast<std::size_t>(4 * out_features));
  qp::cpu::linear_forward_f32(wv, nullptr, xv, want.data());
  std::vector<std::uint16_t> got(want.size());
  const auto layer = qp::cpu::quantize_linear<Scheme>(wv, nullptr);
  qp::cpu::linear_forward(layer, xv, got.data());
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(qp::fp8::from_bf16(got[i])) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return worst / scale;
}

}  // namespace

int main() {
  std::printf("qpolicy %s%s\n", QPOLICY_VERSION_STRING, QPOLICY_WITH_CUDA ? " (CUDA kernels built in)" : "");
  // The JSON front end gives the same plan at run time.
  qp::config_request json;
  json.quantization = "online";
  json.config_text = R"({"targets": {"re:layers\\.1\\.attn\\.qkv_proj": "fp8_per_block", "re:.*o_proj": "fp8_per_channel",
                                     "re:.*up_proj": "mxfp8", "re:.*down_proj": "fp8_per_tensor"}})";
  const auto model = qp::to_runtime(tiny_model);
  const auto runtime = qp::make_plan(qp::resolve(json).config, model);
  if (!(runtime == plan)) {
    std::puts("FAIL: the JSON plan differs from the compile-time one");
    return 1;
  }
  std::mt19937 rng(7);
  int failures = 0;
  std::size_t index = 0;
  qp::for_each_layer<plan>([&]<class Scheme>(const qp::layer_plan&, Scheme) {
    const auto& layer = model.layers[index++];
    if constexpr (qp::cpu::has_linear_layer<Scheme>) {
      const double error = run_layer<Scheme>(layer.shape[0], layer.shape[1], rng);
      // Two e4m3 roundings (weights, and activations where the scheme quantizes them) of up to 1/16
      // each, summed over 256-512 products: a wrong scale or code would be off by orders of magnitude.
      constexpr double bound = 0.125;
      failures += error > bound;
      std::printf("%-24s %-16s relative error %.4f%s\n", layer.name.c_str(), std::string(Scheme::name).c_str(), error,
                  error > bound ? "  FAIL" : "");
    } else {
      std::printf("%-24s %-16s left in bf16\n", layer.name.c_str(), std::string(Scheme::name).c_str());
    }
  });
  std::printf("%s\n", failures ? "FAIL" : "ok");
  return failures ? 1 : 0;
}
