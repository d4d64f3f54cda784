// qpolicy's main demo: a model and a quantization policy fixed at build time, every layer bound to its
// scheme's kernels by the compiler, weights quantized online and a forward pass of every linear and
// MoE layer, with the error against float32 and the time against a float32 pass of the same layer.
//   qpolicy-demo [--config FILE.json [-q NAME]] [--tokens N] [--threads N] [--device auto|cpu|cuda]
// With --config the same runs through the JSON front end: the runtime plan is compared with the
// compile-time one, and the layers reach their kernels through the runtime dispatch.
#include <chrono>
#include <cmath>
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "qpolicy/kernels/cpu/forward.hpp"
#include "qpolicy/kernels/cpu/weight_only_forward.hpp"
#include "qpolicy/kernels/cuda/forward.hpp"
#include "qpolicy/kernels/cuda/weight_only_forward.hpp"
#include "qpolicy/kernels/cuda/device_info.hpp"
#include "qpolicy/numerics/synthetic.hpp"
#include "qpolicy/qpolicy.hpp"

namespace qp = qpolicy;
namespace cpu = qpolicy::cpu;
namespace cuda = qpolicy::cuda;
namespace fp8 = qpolicy::fp8;

// Qwen3-30B-A3B's structure (../shared/models/qwen3-30b-a3b.json) at a size two CPU cores run in
// seconds: 8 blocks instead of 48, hidden 512 instead of 2048, 16 experts of 192 instead of 128 of 768.
constexpr auto mini_block = qp::block(
    qp::linear("model.layers.{i}.self_attn.qkv_proj", "QKVParallelLinear", {768, 512}).with_shards({512, 128, 128}).with_bias(false),
    qp::linear("model.layers.{i}.self_attn.o_proj", "RowParallelLinear", {512, 512}).with_bias(false),
    qp::linear("model.layers.{i}.mlp.gate", "ReplicatedLinear", {16, 512}).not_quantizable().with_bias(false),
    qp::moe("model.layers.{i}.mlp.experts", "FusedMoE", 16, 512, 192));
constexpr auto qwen3_moe_mini = qp::model(
    "qwen3-moe-mini", qp::packed("qkv_proj", {"q_proj", "k_proj", "v_proj"}), qp::packed("gate_up_proj", {"gate_proj", "up_proj"}),
    qp::other("model.embed_tokens", "VocabParallelEmbedding", {151936, 512}), qp::repeat<8>(mini_block),
    qp::other("lm_head", "ParallelLMHead", {151936, 512}));

// The deployment's policy (examples/demo_policy.json is the same in JSON), all nine shorthands: block
// 0's attention in MXFP4 after a 32-wide Hadamard rotation of its input (vLLM 0.34); blocks 1-3
// attention in FP8 (qkv 128x128 blocks, o_proj per channel), blocks 4-7 in MXFP8 (qkv) and MXFP4
// (o_proj); experts per tensor in blocks 0-1, then MXFP4 and NVFP4 per token (two blocks each), INT8
// weight-only in block 6 and LUT-B (3-bit codebooks per 8x64 tile, vLLM 0.34) in block 7.
using demo_policy = qp::quant_config<qp::targets<
    qp::target<"re:model\\.layers\\.0\\.self_attn\\.(qkv|o)_proj", qp::mxfp4_hadamard32>,
    qp::target<"re:model\\.layers\\.[1-3]\\.self_attn\\.qkv_proj", qp::fp8_per_block>,
    qp::target<"re:model\\.layers\\.[1-3]\\.self_attn\\.o_proj", qp::fp8_per_channel>,
    qp::target<"re:model\\.layers\\.[4-7]\\.self_attn\\.qkv_proj", qp::mxfp8>,
    qp::target<"re:model\\.layers\\.[4-7]\\.self_attn\\.o_proj", qp::mxfp4>,
    qp::target<"re:model\\.layers\\.[01]\\.mlp\\.experts", qp::fp8_per_tensor>,
    qp::target<"re:model\\.layers\\.[23]\\.mlp\\.experts", qp::mxfp4>,
    qp::target<"re:model\\.layers\\.[45]\\.mlp\\.experts", qp::nvfp4_per_token>,
    qp::target<"re:model\\.layers\\.6\\.mlp\\.experts", qp::int8_per_channel_weight_only>,
    qp::target<"re:model\\.layers\\.7\\.mlp\\.experts", qp::lut_b_moe>>>;

constexpr auto& demo_plan = qp::plan_for<demo_policy, qwen3_moe_mini>;
static_assert(demo_plan["model.layers.0.self_attn.qkv_proj"].decided == qp::method::mxfp4);
static_assert(qp::hadamard_size_of(demo_plan["model.layers.0.self_attn.o_proj"]) == 32);
static_assert(demo_plan["model.layers.2.self_attn.o_proj"].decided == qp::method::fp8_per_channel);
static_assert(demo_plan["model.layers.5.self_attn.qkv_proj"].decided == qp::method::mxfp8);
static_assert(demo_plan["model.layers.3.mlp.experts"].decided == qp::method::mxfp4);
static_assert(demo_plan["model.layers.4.mlp.experts"].decided == qp::method::nvfp4_per_token);
static_assert(demo_plan["model.layers.6.mlp.experts"].decided == qp::method::int8_per_channel_weight_only);
static_assert(demo_plan["model.layers.7.mlp.experts"].decided == qp::method::lut_b_moe);
static_assert(demo_plan.count(qp::method::fp8_per_tensor) == 2);

namespace {

struct options {
  std::string config_path, quantization = "online", device = "auto";
  std::int64_t tokens = 64;
  unsigned threads = 0;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "qpolicy-demo: " << message
            << "\nusage: qpolicy-demo [--config FILE.json [-q NAME]] [--tokens N] [--threads N] [--device auto|cpu|cuda]\n";
  std::exit(2);
}

std::int64_t positive(const std::string& flag, const std::string& text, std::int64_t most) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || v <= 0 || v > most)
    usage_error(flag + " takes a whole number from 1 to " + std::to_string(most) + ", got '" + text + "'");
  return v;
}

options parse_args(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--config") o.config_path = value();
    else if (a == "-q") o.quantization = value();
    else if (a == "--tokens") o.tokens = positive(a, value(), 1 << 16);
    else if (a == "--threads") o.threads = static_cast<unsigned>(positive(a, value(), 1024));
    else if (a == "--device") {
      o.device = value();
      if (o.device != "auto" && o.device != "cpu" && o.device != "cuda")
        usage_error("--device takes auto, cpu or cuda, got '" + o.device + "'");
    }
    else if (a == "-h" || a == "--help") {
      std::cout << "usage: qpolicy-demo [--config FILE.json [-q NAME]] [--tokens N] [--threads N] [--device auto|cpu|cuda]\n";
      std::exit(0);
    } else usage_error("unknown argument '" + a + "'");
  }
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Synthetic weights and activations, as the tests draw them; the float32 baseline's weights are widened
// before it is timed, as the quantized weights are quantized before theirs.
using qpolicy::synthetic::random_bf16;
using qpolicy::synthetic::relative_error;
using qpolicy::synthetic::widen;

/// The label of a scheme in the report.
template <class Scheme>
std::string label() {
  if constexpr (std::is_same_v<Scheme, qp::not_handled>) return "bf16 (not quantizable)";
  else if constexpr (std::is_same_v<Scheme, qp::unquantized>) return "bf16 (unquantized)";
  else return std::string(Scheme::name);
}

/// What the demo reports per (layer suffix, scheme).
struct kind_stats {
  int layers = 0;
  double flops = 0, quantized_s = 0, f32_s = 0, baseline_s = 0, quantize_s = 0, worst_error = 0, error_sum = 0;
};

class runner {
 public:
  // With a GPU the quantized layers run there (the float32 reference stays on the CPU) and the speed is
  // compared with cuBLASLt's bf16 GEMM of the same FLOPs on the same GPU.
  runner(const options& o, bool gpu) : opts_(o) {
    if (gpu) ctx_ = std::make_unique<cuda::forward_context>();
  }
  std::map<std::pair<std::string, std::string>, kind_stats> stats;
  bool any_nan = false;

  /// One layer with its scheme as a type: quantize its synthetic weights, run it, compare with float32.
  template <class Scheme>
  void run(std::size_t index, const qp::layer_plan& lp) {
    const auto desc = qp::describe_layer(qwen3_moe_mini, index, qp::layer_detail::with_sizes);
    if (desc.kind == qp::layer_kind::other) return;  // embeddings and heads are not GEMM layers here
    std::mt19937 rng(static_cast<unsigned>(1000 + index));
    const std::string scheme = label<Scheme>() + (lp.hadamard ? fmt::format(" + Hadamard {}", qp::hadamard_size_of(lp)) : "");
    auto& s = stats[{std::string(qp::layer_suffix(desc.name)), scheme}];
    ++s.layers;
    const std::int64_t t = opts_.tokens;
    const cpu::forward_options fo{cpu::kernel_path::vectorized, opts_.threads, qp::hadamard_size_of(lp)};
    double err = 0;
    if (desc.kind == qp::layer_kind::linear) {
      const std::int64_t n = desc.shape[0], k = desc.shape[1];
      const auto w = random_bf16(static_cast<std::size_t>(n * k), 1.0f / std::sqrt(float(k)), rng);
      const auto x = random_bf16(static_cast<std::size_t>(t * k), 1.0f, rng);
      const qpolicy::input_view wv{w.data(), qpolicy::element::bf16, n, k}, xv{x.data(), qpolicy::element::bf16, t, k};
      std::vector<float> ref(static_cast<std::size_t>(t * n));
      const auto wf = widen(w);
      auto t0 = std::chrono::steady_clock::now();
      cpu::linear_forward_f32({wf.data(), qpolicy::element::f32, n, k}, nullptr, xv, ref.data(), fo);
      s.f32_s += seconds_since(t0);
      std::vector<std::uint16_t> out(ref.size());
      // A quantized layer (any scheme: the same calls) run on the GPU or the CPU.
      const auto run_layer = [&](const auto& layer) {
        if (ctx_) {
          const auto dl = cuda::upload(layer);
          const auto dx = cuda::to_device(x.data(), x.size() * 2);
          cuda::device_memory dout(out.size() * 2);
          s.quantized_s += gpu_seconds([&] { cuda::linear_forward(*ctx_, dl, dx.as<std::uint16_t>(), t, dout.as<std::uint16_t>()); });
          cuda::to_host(dout, out.data(), out.size() * 2);
          s.baseline_s += gpu_bf16_seconds(t, n, k);
        } else {
          t0 = std::chrono::steady_clock::now();
          cpu::linear_forward(layer, xv, out.data(), fo);
          s.quantized_s += seconds_since(t0);
        }
      };
      // One path for every scheme: its layer type, chosen by its row, with the plan's activation.
      if constexpr (cpu::has_linear_layer<Scheme>) {
        with_pairing<Scheme, qp::layer_kind::linear>(lp, desc, [&]<class Act>(Act) {
          t0 = std::chrono::steady_clock::now();
          const auto layer = cpu::quantize_linear<Scheme, Act>(wv, nullptr, fo);
          s.quantize_s += seconds_since(t0);
          run_layer(layer);
        });
      } else if constexpr (cpu::has_layers<Scheme>) {
        throw std::invalid_argument(desc.name + ": " + std::string(Scheme::name) + " quantizes MoE experts only");
      } else {  // unquantized (or not handled): the bf16 layer, float32 accumulation
        for (std::size_t i = 0; i < ref.size(); ++i) out[i] = fp8::to_bf16(ref[i]);
        s.quantized_s += seconds_since(t0);
      }
      s.flops += 2.0 * double(t) * double(n) * double(k);
      err = relative_error(out, ref);
    } else {
      const std::int64_t e = *desc.num_experts, h = *desc.hidden_size, inter = *desc.intermediate_size;
      const std::int64_t top_k = std::min<std::int64_t>(4, e);
      const auto w13 = random_bf16(static_cast<std::size_t>(e * 2 * inter * h), 1.0f / std::sqrt(float(h)), rng);
      const auto w2 = random_bf16(static_cast<std::size_t>(e * h * inter), 1.0f / std::sqrt(float(inter)), rng);
      const auto x = random_bf16(static_cast<std::size_t>(t * h), 1.0f, rng);
      const qpolicy::input_view w13v{w13.data(), qpolicy::element::bf16, e * 2 * inter, h}, w2v{w2.data(), qpolicy::element::bf16, e * h, inter},
          xv{x.data(), qpolicy::element::bf16, t, h};
      // Synthetic routing: top_k distinct experts per token, softmax weights.
      std::vector<std::int32_t> ids(static_cast<std::size_t>(t * top_k));
      std::vector<float> weights(ids.size());
      std::normal_distribution<float> logit;
      for (std::int64_t tok = 0; tok < t; ++tok) {
        std::vector<std::pair<float, int>> scores;
        for (int q = 0; q < e; ++q) scores.push_back({logit(rng), q});
        std::partial_sort(scores.begin(), scores.begin() + top_k, scores.end(), std::greater<>());
        float total = 0;
        for (std::int64_t j = 0; j < top_k; ++j) total += std::exp(scores[static_cast<std::size_t>(j)].first);
        for (std::int64_t j = 0; j < top_k; ++j) {
          ids[static_cast<std::size_t>(tok * top_k + j)] = scores[static_cast<std::size_t>(j)].second;
          weights[static_cast<std::size_t>(tok * top_k + j)] = std::exp(scores[static_cast<std::size_t>(j)].first) / total;
        }
      }
      const cpu::routing route{ids.data(), weights.data(), top_k};
      std::vector<float> ref(static_cast<std::size_t>(t * h));
      const auto w13f = widen(w13), w2f = widen(w2);
      auto t0 = std::chrono::steady_clock::now();
      cpu::moe_forward_f32({w13f.data(), qpolicy::element::f32, e * 2 * inter, h}, {w2f.data(), qpolicy::element::f32, e * h, inter}, e,
                           xv, route, ref.data(), fo);
      s.f32_s += seconds_since(t0);
      std::vector<std::uint16_t> out(ref.size());
      const auto run_layer = [&](const auto& layer) {
        if (ctx_) {
          const auto dm = cuda::upload(layer);
          const auto dx = cuda::to_device(x.data(), x.size() * 2);
          cuda::device_memory dout(out.size() * 2);
          s.quantized_s += gpu_seconds([&] { cuda::moe_forward(*ctx_, dm, dx.as<std::uint16_t>(), t, route, dout.as<std::uint16_t>()); });
          cuda::to_host(dout, out.data(), out.size() * 2);
          s.baseline_s += gpu_bf16_seconds(t * top_k, 3 * inter, h);
        } else {
          t0 = std::chrono::steady_clock::now();
          cpu::moe_forward(layer, xv, route, out.data(), fo);
          s.quantized_s += seconds_since(t0);
        }
      };
      if constexpr (cpu::has_layers<Scheme>) {
        with_pairing<Scheme, qp::layer_kind::moe>(lp, desc, [&]<class Act>(Act) {
          t0 = std::chrono::steady_clock::now();
          const auto layer = cpu::quantize_moe<Scheme, Act>(w13v, w2v, e, fo);
          s.quantize_s += seconds_since(t0);
          run_layer(layer);
        });
      } else {
        for (std::size_t i = 0; i < ref.size(); ++i) out[i] = fp8::to_bf16(ref[i]);
        s.quantized_s += seconds_since(t0);
      }
      s.flops += 2.0 * double(t * top_k) * (2.0 * double(inter) * double(h) + double(h) * double(inter));
      err = relative_error(out, ref);
    }
    any_nan |= !(err == err);
    s.worst_error = std::max(s.worst_error, err);
    s.error_sum += err;
  }

 private:
  options opts_;

  /// Runs body(Act{}) with the layer's activation tag (the plan's, through the dispatch), or refuses,
  /// with the pairing rule's sentence, a pairing the layer types do not take.
  template <class Scheme, qp::layer_kind Kind, class Body>
  static void with_pairing(const qp::layer_plan& lp, const qp::layer_desc& desc, Body&& body) {
    qp::with_layer_activation<Scheme, Kind>(lp, [&]<class Act>(Act act) {
      if constexpr (!cpu::pairs_with<Scheme, Act>) cpu::refuse_pairing<Scheme, Act>(desc.name);
      else body(act);
    });
  }
  std::unique_ptr<cuda::forward_context> ctx_;

  /// Seconds of one run of `fn` on the GPU, after a warm-up run.
  template <class Fn>
  static double gpu_seconds(Fn&& fn) {
    fn();
    cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    cuda::synchronize();
    return seconds_since(t0);
  }
  /// cuBLASLt's bf16 GEMM [rows, k] x [n, k]^T on the GPU: the baseline of the GPU speed column.
  double gpu_bf16_seconds(std::int64_t rows, std::int64_t n, std::int64_t k) {
    cuda::device_memory a(static_cast<std::size_t>(rows * k) * 2), w(static_cast<std::size_t>(n * k) * 2),
        out(static_cast<std::size_t>(rows * n) * 2);
    return gpu_seconds([&] { ctx_->runner.run_bf16(a.as<std::uint16_t>(), w.as<std::uint16_t>(), out.as<std::uint16_t>(), rows, n, k); });
  }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read config file '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  const auto opts = parse_args(argc, argv);
  try {
    const auto device = qp::cuda::query_devices();
    const bool usable_gpu = device.count > 0 && device.built_with_cuda;
    if (opts.device == "cuda" && !usable_gpu) {
      fmt::print(stderr, "qpolicy-demo: --device cuda: {}\n", device.description);
      return 2;
    }
    const bool gpu = opts.device == "cuda" || (opts.device == "auto" && usable_gpu);
    fmt::print("qpolicy demo: {} (Qwen3-30B-A3B's structure: 8 blocks, hidden 512, 16 experts of 192, top-4), "
               "{} tokens per layer\n",
               qwen3_moe_mini.name, opts.tokens);
    if (gpu)
      fmt::print("kernels: CUDA on {} for the quantized layers (float32 reference and bf16 layers on the CPU)\n",
                 device.description);
    else
      fmt::print("kernels: CPU ({})\n", opts.threads ? fmt::format("{} threads", opts.threads) : "all cores");

    const qp::plan compiled = qp::to_runtime(demo_plan);
    fmt::print("\ncompile-time plan ({} layers, {} decided by the rules, the rest shared by layers the "
               "patterns cannot tell apart):\n",
               demo_plan.size(), demo_plan.decided);
    for (const auto& line : compiled.summary) fmt::print("  {}\n", line);

    runner r(opts, gpu);
    std::size_t index = 0;
    if (opts.config_path.empty()) {
      qp::for_each_layer<demo_plan>([&]<class Scheme>(const qp::layer_plan& lp, Scheme) { r.run<Scheme>(index++, lp); });
    } else {
      qp::config_request request;
      request.quantization = opts.quantization;
      request.config_text = read_file(opts.config_path);
      const auto resolved = qp::resolve(request);
      const auto runtime = qp::make_plan(resolved.config, qp::to_runtime(qwen3_moe_mini));
      std::size_t differ = 0;
      for (std::size_t i = 0; i < runtime.layers.size(); ++i) differ += !(runtime.layers[i] == demo_plan[i]);
      fmt::print("\nJSON plan from {} (-q {}): {}\n", opts.config_path, opts.quantization,
                 runtime == demo_plan
                     ? std::string("identical to the compile-time plan, layer by layer")
                     : fmt::format("differs from the compile-time plan in {} layer(s); running the JSON plan", differ));
      if (!(runtime == demo_plan))
        for (const auto& line : runtime.summary) fmt::print("  {}\n", line);
      for (const auto& w : runtime.warnings) fmt::print("  warning: {}\n", w);
      if (const auto* e = runtime.first_error()) throw std::invalid_argument("the JSON plan has a layer error: " + *e);
      qp::for_each_layer(runtime, [&]<class Scheme>(const qp::layer_plan& lp, Scheme) { r.run<Scheme>(index++, lp); });
    }

    fmt::print("\nforward pass per layer kind ({} tokens; error = ||out - fp32|| / ||fp32||, bf16 output):\n", opts.tokens);
    // CPU: speed against the float32 pass of the same layer. GPU: against cuBLASLt's bf16 GEMM of the
    // same FLOPs, for the layers that ran there.
    fmt::print("  {:<20} {:<30} {:>6} {:>10} {:>10} {:>10} {:>12} {:>12}\n", "layer", "scheme", "layers", "mean err",
               "worst err", "quantize", "GFLOPS", gpu ? "vs bf16 GPU" : "vs fp32");
    double flops = 0, quantized = 0, baseline = 0;
    for (const auto& [key, s] : r.stats) {
      const double base = gpu ? s.baseline_s : s.f32_s;
      const std::string ratio = base > 0 ? fmt::format("{:.2f}x", base / s.quantized_s) : "-";
      fmt::print("  {:<20} {:<30} {:>6} {:>9.2f}% {:>9.2f}% {:>8.1f}ms {:>12.1f} {:>12}\n", key.first, key.second, s.layers,
                 100 * s.error_sum / s.layers, 100 * s.worst_error, 1e3 * s.quantize_s, s.flops / s.quantized_s / 1e9, ratio);
      if (base > 0) {
        flops += s.flops;
        quantized += s.quantized_s;
        baseline += base;
      }
    }
    if (gpu)
      fmt::print("  quantized layers on the GPU: {:.1f} GFLOPS, {:.2f}x cuBLASLt bf16 of the same FLOPs\n", flops / quantized / 1e9,
                 baseline / quantized);
    else
      fmt::print("  all layers: {:.1f} GFLOPS quantized, {:.1f} GFLOPS float32 ({:.2f}x)\n", flops / quantized / 1e9,
                 flops / baseline / 1e9, baseline / quantized);
    // What the low-precision layers ran: Hopper's kernels, and where that emulates another architecture.
    for (const auto& c : qp::schemes::scheme_table) {
      bool used_linear = false, used_moe = false, used_rotated = false;
      for (const auto& [key, s] : r.stats) {
        if (key.second.rfind(qp::to_string(c.id), 0) != 0) continue;
        const bool rotated = key.second.find(" + Hadamard") != std::string::npos;
        if (key.second != qp::to_string(c.id) && !rotated) continue;
        (key.first == "mlp.experts" ? used_moe : rotated ? used_rotated : used_linear) = true;
      }
      if (used_linear && !c.linear_kernel.empty()) fmt::print("  note: {} linear layers run {}\n", qp::to_string(c.id), c.linear_kernel);
      if (used_rotated)
        fmt::print("  note: {} linear layers with a Hadamard-rotated input rotate it (bf16, vLLM 0.34's InputHadamardLinearMethod), "
                   "then run {}\n", qp::to_string(c.id), c.linear_kernel);
      if (used_moe && !c.moe_kernel.empty()) fmt::print("  note: {} experts run {}\n", qp::to_string(c.id), c.moe_kernel);
    }
    if (r.any_nan) {
      fmt::print(stderr, "qpolicy-demo: a layer produced NaN\n");
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "qpolicy-demo: {}\n", e.what());
    return 1;
  }
}
