// Checkpoint conversion against a durable copy: generates a bf16 model directory (dense and MoE
// layers, about QPOLICY_CHECKPOINT_BENCH_GB GB, default 2), then times `qpolicy quantize MODEL -o OUT`
// for each online shorthand and `cp -r MODEL COPY && sync` in the same run (both read a warm page cache;
// qpolicy's output is fsync'd, hence the sync), best of QPOLICY_CHECKPOINT_BENCH_RUNS (default 3: a
// conversion's time swings by 20% with the disk from run to run, so that with two runs one of the five
// low-precision ratios came out under 0.8x in most passes, each time another one).
// Prints input GB/s, the FP8 schemes' ratio to the copy and the low-precision ones' to fp8_per_block
// converted in turns with each,
// and each conversion's peak RSS (wait4's ru_maxrss). Then
// already-quantized inputs made from the model (NVFP4 experts; FP8 blocks) converted to what a bf16
// conversion of the same model gives, against that bf16 conversion timed in the same run.
//   checkpoint_bench [--big-tensor] [DIR]
// --big-tensor adds a 1 GiB down_proj (the bounded-memory case); DIR (default a temporary directory)
// keeps the generated model between runs.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "qpolicy/io/safetensors.hpp"

extern char** environ;

namespace fs = std::filesystem;
namespace st = qpolicy::safetensors;

namespace {

struct run_result {
  double seconds = 0;
  long peak_rss_kb = 0;
  int status = -1;
};

/// Runs argv, waits, and reports wall time, the child's peak RSS and its exit status.
run_result run(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  run_result r;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) return r;
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.peak_rss_kb = usage.ru_maxrss;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

/// bf16 values of a weight's scale (exponent 2^-8..2^-5, random mantissa and sign), fast: xorshift.
void fill(std::vector<std::uint16_t>& v, std::uint64_t seed) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& e : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    e = static_cast<std::uint16_t>((x & 0x807F) | ((0x77 + (x >> 20) % 3) << 7));
  }
}

/// Writes the model: embeddings and LM head (copied), dense layers, then MoE layers, one shard per
/// about 1 GB, an index, config.json and a tokenizer file.
std::uint64_t make_model(const fs::path& dir, double gb, bool big_tensor) {
  fs::create_directories(dir);
  const std::int64_t h = 2048, vocab = 32000, inter = 5632, experts = 8, moe_inter = 1408;
  struct t {
    std::string name;
    std::int64_t rows, cols;
  };
  std::vector<t> tensors{{"model.embed_tokens.weight", vocab, h}};
  auto attention = [&](const std::string& p) {
    tensors.push_back({p + "self_attn.q_proj.weight", h, h});
    tensors.push_back({p + "self_attn.k_proj.weight", 512, h});
    tensors.push_back({p + "self_attn.v_proj.weight", 512, h});
    tensors.push_back({p + "self_attn.o_proj.weight", h, h});
  };
  std::uint64_t bytes = static_cast<std::uint64_t>(2 * vocab * h * 2);
  const std::uint64_t target = static_cast<std::uint64_t>(gb * 1e9);
  int layer = 0;
  if (big_tensor) {  // one layer whose down_proj is 1 GiB of bf16
    const auto p = "model.layers." + std::to_string(layer++) + ".";
    attention(p);
    tensors.push_back({p + "mlp.gate_proj.weight", 262144, h});
    tensors.push_back({p + "mlp.up_proj.weight", 262144, h});
    tensors.push_back({p + "mlp.down_proj.weight", h, 262144});
    bytes += 3ull * 262144 * h * 2;
  }
  // Half dense, half MoE layers until the target size.
  const std::uint64_t dense_bytes = (2 * h * h + 2 * 512 * h + 3 * inter * h) * 2;
  const std::uint64_t moe_bytes = (2 * h * h + 2 * 512 * h + experts * 3 * moe_inter * h + experts * h) * 2;
  for (int k = 0; bytes + (k % 2 ? moe_bytes : dense_bytes) <= target; ++k) {
    const auto p = "model.layers." + std::to_string(layer++) + ".";
    attention(p);
    if (k % 2 == 0) {
      tensors.push_back({p + "mlp.gate_proj.weight", inter, h});
      tensors.push_back({p + "mlp.up_proj.weight", inter, h});
      tensors.push_back({p + "mlp.down_proj.weight", h, inter});
      bytes += dense_bytes;
    } else {
      tensors.push_back({p + "mlp.gate.weight", experts, h});
      for (int e = 0; e < experts; ++e) {
        const auto x = p + "mlp.experts." + std::to_string(e) + ".";
        tensors.push_back({x + "gate_proj.weight", moe_inter, h});
        tensors.push_back({x + "up_proj.weight", moe_inter, h});
        tensors.push_back({x + "down_proj.weight", h, moe_inter});
      }
      bytes += moe_bytes;
    }
  }
  tensors.push_back({"lm_head.weight", vocab, h});
  // Shards of about 1 GB, in order.
  std::vector<std::vector<t>> shards(1);
  std::uint64_t in_shard = 0;
  for (const auto& x : tensors) {
    const std::uint64_t b = static_cast<std::uint64_t>(x.rows * x.cols * 2);
    if (in_shard > 0 && in_shard + b > 1'000'000'000ull) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(x);
    in_shard += b;
  }
  std::string weight_map;
  std::uint64_t seed = 1, total = 0;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const auto file = fmt::format("model-{:05}-of-{:05}.safetensors", s + 1, shards.size());
    std::vector<st::tensor_spec> specs;
    for (const auto& x : shards[s]) specs.push_back({x.name, st::dtype::BF16, {x.rows, x.cols}});
    st::file_writer w((dir / file).string(), specs, {{"format", "pt"}});
    for (const auto& x : shards[s]) {
      std::vector<std::uint16_t> v(static_cast<std::size_t>(x.rows * x.cols));
      fill(v, seed++);
      w.write(std::as_bytes(std::span(v)));
      total += v.size() * 2;
      weight_map += fmt::format("{}\"{}\": \"{}\"", weight_map.empty() ? "" : ", ", x.name, file);
    }
    w.finish();
  }
  std::ofstream(dir / "model.safetensors.index.json") << "{\"metadata\": {\"total_size\": " << total << "}, \"weight_map\": {"
                                                      << weight_map << "}}\n";
  std::ofstream(dir / "config.json") << "{\n  \"architectures\": [\"Qwen3MoeForCausalLM\"],\n  \"hidden_size\": 2048\n}\n";
  std::ofstream(dir / "tokenizer.json") << std::string(4 << 20, 't');
  return total;
}

/// The best of `runs` conversions `args` (the output removed first and after); status != 0 on failure.
run_result best_of(const std::vector<std::string>& args, const fs::path& out, int runs) {
  run_result best{1e300, 0, 0};
  for (int i = 0; i < runs; ++i) {
    fs::remove_all(out);
    const auto r = run(args);
    if (r.status != 0) {
      fmt::print(stderr, "checkpoint_bench: {} exited {}\n", fmt::join(args, " "), r.status);
      return r;
    }
    best.seconds = std::min(best.seconds, r.seconds);
    best.peak_rss_kb = std::max(best.peak_rss_kb, r.peak_rss_kb);
  }
  fs::remove_all(out);
  return best;
}

/// Already-quantized inputs: the model converted once into a quantized checkpoint (untimed), then that
/// checkpoint converted to the same output as a bf16 conversion gives, both timed in this run. Speed is
/// the bf16 model's bytes per second (the same model either way); the ratio is the bf16 conversion's time
/// over the pre-quantized one's.
int prequantized_cases(const char* exe, const fs::path& model, const fs::path& root, std::uint64_t bytes, int runs) {
  struct prequantized_case {
    const char* name;
    const char* make;      // the online config that makes the quantized input
    const char* convert;   // the config the quantized input is converted with
    const char* same;      // the config that gives the bf16 model the same output
  };
  const prequantized_case cases[] = {
      // vLLM's path: NVFP4 experts decoded (vLLM's dequantize_nvfp4_moe_weights), then FP8 blocks.
      {"nvfp4_experts_to_fp8_per_block", R"({"moe": "nvfp4_per_token"})", R"({"linear": "fp8_per_block", "moe": "fp8_per_block"})",
       R"({"linear": "fp8_per_block", "moe": "fp8_per_block"})"},
      // DeepSeek-style FP8 blocks: experts kept (copied), linear layers decoded then MXFP8 (an extension).
      {"fp8_blocks_to_mxfp8_linear", R"({"linear": "fp8_per_block", "moe": "fp8_per_block"})", R"({"linear": "mxfp8"})",
       R"({"linear": "mxfp8", "moe": "fp8_per_block"})"},
  };
  int failed = 0;
  for (const auto& c : cases) {
    const auto input = root / (std::string("pre-") + c.name), out = root / "out-pre";
    fs::remove_all(input);
    if (run({exe, "quantize", "-q", "online", "-c", c.make, "--threads", "2", model.string(), "-o", input.string()}).status != 0) {
      fmt::print(stderr, "checkpoint_bench: making the {} input failed\n", c.name);
      ++failed;
      continue;
    }
    ::sync();
    // The two conversions alternate, best of each (of at least 3): a drift in the disk's speed during the
    // runs then weighs on both alike.
    run_result pre{1e300, 0, 0}, direct{1e300, 0, 0};
    for (int i = 0; i < std::max(runs, 3) && pre.status == 0 && direct.status == 0; ++i) {
      const auto p = best_of({exe, "quantize", "-c", c.convert, "--threads", "2", input.string(), "-o", out.string()}, out, 1);
      const auto d = best_of({exe, "quantize", "-q", "online", "-c", c.same, "--threads", "2", model.string(), "-o", out.string()}, out, 1);
      pre = {std::min(pre.seconds, p.seconds), std::max(pre.peak_rss_kb, p.peak_rss_kb), p.status};
      direct = {std::min(direct.seconds, d.seconds), std::max(direct.peak_rss_kb, d.peak_rss_kb), d.status};
    }
    fs::remove_all(input);
    if (pre.status != 0 || direct.status != 0) {
      ++failed;
      continue;
    }
    fmt::print("bench: checkpoint_prequantized_{} {:.2f} GB/s (bf16 model bytes) vs bf16_conversion {:.2f}x\n", c.name, bytes / pre.seconds / 1e9,
               direct.seconds / pre.seconds);
    fmt::print("bench: checkpoint_prequantized_{}_peak_rss {} MB\n", c.name, pre.peak_rss_kb / 1024);
  }
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  const char* exe = std::getenv("QPOLICY_EXE");
  if (!exe) {
    fmt::print(stderr, "checkpoint_bench: set QPOLICY_EXE to the qpolicy executable\n");
    return 1;
  }
  bool big = false;
  std::string dir_arg;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--big-tensor") big = true;
    else dir_arg = argv[i];
  }
  const double gb = std::getenv("QPOLICY_CHECKPOINT_BENCH_GB") ? std::atof(std::getenv("QPOLICY_CHECKPOINT_BENCH_GB")) : 2.0;
  const int runs = std::getenv("QPOLICY_CHECKPOINT_BENCH_RUNS") ? std::atoi(std::getenv("QPOLICY_CHECKPOINT_BENCH_RUNS")) : 3;
  const fs::path root = dir_arg.empty() ? fs::temp_directory_path() / fmt::format("qpolicy-checkpoint-bench-{}", ::getpid()) : fs::path(dir_arg);
  const auto model = root / (big ? "model-big" : "model");
  std::uint64_t bytes = 0;
  if (fs::exists(model / "config.json")) {
    for (const auto& e : fs::directory_iterator(model))
      if (e.path().extension() == ".safetensors") bytes += fs::file_size(e.path());
  } else {
    // Generated in a child process: this process stays small, so that the conversions' peak RSS
    // (which a spawned child inherits as its high-water mark until exec) is their own.
    const pid_t pid = ::fork();
    if (pid == 0) {
      make_model(model, gb, big);
      std::_Exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fmt::print(stderr, "checkpoint_bench: generating the model failed\n");
      return 1;
    }
    for (const auto& e : fs::directory_iterator(model))
      if (e.path().extension() == ".safetensors") bytes += fs::file_size(e.path());
  }
  ::sync();  // the generated model's writes go to disk before anything is timed
  fmt::print("# model: {:.2f} GB of bf16 tensors in {}\n", bytes / 1e9, model.string());
  const auto copy = root / "copy";
  double cp_best = 1e300;
  for (int i = 0; i < runs; ++i) {
    fs::remove_all(copy);
    const auto r = run({"/bin/sh", "-c", "cp -r \"$0\" \"$1\" && sync", model.string(), copy.string()});
    if (r.status != 0) {
      fmt::print(stderr, "checkpoint_bench: cp failed\n");
      return 1;
    }
    cp_best = std::min(cp_best, r.seconds);
  }
  fs::remove_all(copy);
  fmt::print("bench: checkpoint_cp_sync {:.2f} GB/s ({:.2f} s)\n", bytes / cp_best / 1e9, cp_best);
  int failed = 0;
  // One conversion of the model with an online shorthand, its output removed before and after.
  const auto convert = [&](const std::string& scheme) {
    const auto out = root / ("out-" + scheme);
    fs::remove_all(out);
    // vLLM defers a bare -q mxfp8 / -q mxfp4 to the checkpoint's own config: those take theirs explicitly.
    const bool deferred = scheme == "mxfp8" || scheme == "mxfp4";
    const auto config = fmt::format(R"({{"linear": "{0}", "moe": "{0}"}})", scheme);
    const auto r = deferred ? run({exe, "quantize", "-q", "online", "-c", config, "--threads", "2", model.string(), "-o", out.string()})
                            : run({exe, "quantize", "-q", scheme, "--threads", "2", model.string(), "-o", out.string()});
    if (r.status != 0) fmt::print(stderr, "checkpoint_bench: quantize -q {} exited {}\n", scheme, r.status);
    fs::remove_all(out);
    return r;
  };
  // Every online shorthand: the FP8 ones against cp + sync, the low-precision ones against fp8_per_block
  // converted in turns with them (this disk's speed drifts between runs, as the page cache fills and
  // drains). int8_per_channel_weight_only and nvfp4_per_token quantize the experts.
  for (const std::string scheme : {"fp8_per_tensor", "fp8_per_channel", "fp8_per_block", "mxfp8", "mxfp4", "mxfp4_hadamard32",
                                   "int8_per_channel_weight_only", "nvfp4_per_token"}) {
    const bool fp8 = scheme.starts_with("fp8");
    if (big && !fp8) continue;
    run_result best{1e300, 0, 0};
    double fp8_per_block_seconds = 1e300;
    for (int i = 0; i < runs; ++i) {
      if (!fp8) {
        const auto baseline = convert("fp8_per_block");
        if (baseline.status != 0) {
          ++failed;
          break;
        }
        fp8_per_block_seconds = std::min(fp8_per_block_seconds, baseline.seconds);
      }
      const auto r = convert(scheme);
      if (r.status != 0) {
        ++failed;
        break;
      }
      if (r.seconds < best.seconds) best.seconds = r.seconds;
      best.peak_rss_kb = std::max(best.peak_rss_kb, r.peak_rss_kb);
    }
    if (fp8)
      fmt::print("bench: checkpoint_{}{} {:.2f} GB/s vs cp_sync {:.2f}x\n", scheme, big ? "_big_tensor" : "", bytes / best.seconds / 1e9,
                 cp_best / best.seconds);
    else
      fmt::print("bench: checkpoint_{} {:.2f} GB/s vs fp8_per_block {:.2f}x\n", scheme, bytes / best.seconds / 1e9,
                 fp8_per_block_seconds / best.seconds);
    fmt::print("bench: checkpoint_{}{}_peak_rss {} MB\n", scheme, big ? "_big_tensor" : "", best.peak_rss_kb / 1024);
  }
  if (!big) failed += prequantized_cases(exe, model, root, bytes, runs);
  if (dir_arg.empty()) fs::remove_all(root);
  return failed ? 1 : 0;
}
