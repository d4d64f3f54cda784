// Hostile suite, contents: sizes that overflow or describe nothing, indices out of range, misaligned
// tensor data, indexes that disagree with their shards, and command lines that repeat or misuse flags.
#include "qpolicy/kernels/cpu/cpu_target.hpp"
#include "hostile.hpp"

using namespace hostile;

TEST_CASE("huge zero-element and overflowing shapes are refused at once", "[hostile][sizes]") {
  temp_dir d("hostile-sizes");
  const std::vector<std::pair<std::string, std::string>> files{
      {"max.safetensors", R"({"x.weight": {"dtype": "BF16", "shape": [9223372036854775807, 0], "data_offsets": [0, 0]}})"},
      {"tera.safetensors", R"({"x.weight": {"dtype": "BF16", "shape": [1099511627776, 0], "data_offsets": [0, 0]}})"},
  };
  for (const auto& [name, header] : files) write_file(d / name, safetensors(header, ""));
  write_file(d / "wide.safetensors",
             safetensors(R"({"x.weight": {"dtype": "BF16", "shape": [1099511627776, 1099511627776, 0], "data_offsets": [0, 0]}})", ""));
  write_file(d / "u64.safetensors", safetensors(R"({"x.weight": {"dtype": "F32", "shape": [18446744073709551615, 1], "data_offsets": [0, 0]}})", ""));
  const auto before = list(d.path());
  const auto out = d / "out.safetensors";
  for (const auto& [name, header] : files) {
    INFO(name);
    // A planned weight with no elements has nothing to quantize: exit 2 within seconds, no 4 TiB scales.
    for (const char* scheme : {"fp8_per_tensor", "fp8_per_channel", "fp8_per_block"})
      check_refused(run_qpolicy({"quantize", "-q", scheme, "-o", out, d / name}, 30), 2, "with no elements; there is no weight to quantize",
                    d.path(), before);
    const auto r = run_qpolicy({"quantize-tensor", "--key", "fp8_per_channel_static", d / name, "-o", out}, 30);
    check_refused(r, 2, "has no elements; left out", d.path(), before);
    CHECK_THAT(r.err, Catch::Contains("no 2-D bf16/fp16/fp32 tensor to quantize"));
  }
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, d / "wide.safetensors"}), 2,
                "shape [1099511627776, 1099511627776, 0] of BF16 has more elements than a 64-bit size can count", d.path(), before);
  // 2^64 - 1 is printed as written, not as -1.
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, d / "u64.safetensors"}), 2,
                "shape [18446744073709551615, 1] of F32", d.path(), before);
}

TEST_CASE("expert indices past int32 and past int64 are exit 2 with the tensor's name", "[hostile][sizes]") {
  temp_dir d("hostile-expert");
  for (const std::string index : {"9223372036854775807", "99999999999999999999999", "2147483648"}) {
    INFO(index);
    const auto name = "model.layers.0.mlp.experts." + index + ".gate_proj.weight";
    write_file(d / "in.safetensors", safetensors(R"({")" + name + R"(": {"dtype": "BF16", "shape": [2, 16], "data_offsets": [0, 64]}})",
                                                 std::string(64, '\x3c')));
    const auto before = list(d.path());
    check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", d / "out.safetensors", d / "in.safetensors"}), 2,
                  "tensor '" + name + "' has expert index " + index + "; expected an index from 0 to 2147483647", d.path(), before);
  }
}

TEST_CASE("shard sizes that overflow int64 are a model error", "[hostile][sizes]") {
  temp_dir d("hostile-shards");
  write_file(d / "model.json", R"({"layers": [{"name": "a.qkv_proj", "class": "QKVParallelLinear", "kind": "linear",
    "shape": [2, 4], "shard_sizes": [9223372036854775807, 9223372036854775807, 2]}]})");
  const auto before = list(d.path());
  check_refused(run_qpolicy({"plan", "-q", "fp8_per_tensor", "--model", d / "model.json"}), 2,
                "layers.0.shard_sizes: shard sizes add up to more than 2^63 - 1, not out_features 2 in the model file", d.path(), before);
}

TEST_CASE("tensor data at odd offsets quantizes exactly as aligned data", "[hostile][alignment]") {
  temp_dir d("hostile-align");
  std::string w;
  for (int i = 0; i < 8 * 256; ++i) w += std::string{static_cast<char>(i * 13), static_cast<char>(0x3c + i % 5)};
  const std::string entry = R"("x.weight": {"dtype": "BF16", "shape": [8, 256], "data_offsets": )";
  write_file(d / "aligned.safetensors", safetensors("{" + entry + "[0, 4096]}}", w));
  write_file(d / "odd.safetensors", safetensors(R"({"pad": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, )" + entry + "[1, 4097]}}",
                                                "\x7f" + w));
  for (const char* key : {"fp8_per_token", "fp8_per_block_static", "fp8_per_tensor_static", "fp8_per_block_dynamic"}) {
    INFO(key);
    const auto a = run_qpolicy({"quantize-tensor", "--key", key, d / "aligned.safetensors", "-o", d / "a.safetensors"});
    const auto b = run_qpolicy({"quantize-tensor", "--key", key, d / "odd.safetensors", "-o", d / "b.safetensors"});
    REQUIRE(a.status == 0);
    REQUIRE(b.status == 0);
    CHECK(read_file(d / "a.safetensors") == read_file(d / "b.safetensors"));
  }
  for (const char* scheme : {"fp8_per_tensor", "fp8_per_channel", "fp8_per_block"}) {
    INFO(scheme);
    REQUIRE(run_qpolicy({"quantize", "-q", scheme, "-o", d / "a.safetensors", d / "aligned.safetensors"}).status == 0);
    REQUIRE(run_qpolicy({"quantize", "-q", scheme, "-o", d / "b.safetensors", d / "odd.safetensors"}).status == 0);
    const auto a = read_file(d / "a.safetensors"), b = read_file(d / "b.safetensors");
    CHECK(b.find(a.substr(a.size() - 2048)) != std::string::npos);  // the same codes (the pad tensor shifts offsets)
  }
}

TEST_CASE("an index must agree with its shards; duplicate keys are warned about", "[hostile][index]") {
  temp_dir d("hostile-index");
  write_file(d / "a.safetensors", small_checkpoint());
  write_file(d / "b.safetensors", safetensors(R"({"model.norm.weight": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}})", std::string(8, '\x3c')));
  const std::string all = R"("m.layers.0.self_attn.q_proj.weight": "a.safetensors", "m.layers.0.self_attn.k_proj.weight": "a.safetensors",
    "m.layers.0.self_attn.v_proj.weight": "a.safetensors", "m.layers.0.self_attn.o_proj.weight": "a.safetensors",
    "model.norm.weight": "b.safetensors")";
  write_file(d / "missing.index.json", R"({"weight_map": {)" + all + R"(, "ghost.weight": "b.safetensors", "lm_head.weight": "a.safetensors"}})");
  write_file(d / "unlisted.index.json", R"({"weight_map": {)" + all + "}}");
  write_file(d / "wrong.index.json", R"({"weight_map": {)" + all + R"(, "lm_head.weight": "b.safetensors"}})");
  write_file(d / "escape.index.json", R"({"weight_map": {"lm_head.weight": "../a.safetensors"}})");
  write_file(d / "dup.index.json", R"({"weight_map": {)" + all + R"(, "lm_head.weight": "b.safetensors", "lm_head.weight": "a.safetensors"}})");
  const auto before = list(d.path());
  const auto out = d / "out.safetensors";
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, d / "missing.index.json"}), 2,
                "weight_map names tensors that their shards do not hold: 'ghost.weight' in " + (d / "b.safetensors"), d.path(), before);
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, d / "unlisted.index.json"}), 2,
                "shards hold tensors that weight_map does not list: 'lm_head.weight' of " + (d / "a.safetensors"), d.path(), before);
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, d / "wrong.index.json"}), 2,
                "'lm_head.weight' in " + (d / "b.safetensors"), d.path(), before);
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, d / "escape.index.json"}), 2,
                "expected a shard file in the index's directory", d.path(), before);
  const auto r = run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, d / "dup.index.json"});
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK_THAT(r.err, Catch::Contains("warning: " + (d / "dup.index.json") + ": duplicate key 'lm_head.weight' in weight_map"));
}

TEST_CASE("help on every command; repeated flags and --tp alone are usage errors", "[hostile][cli]") {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"-h"}, {"--help"}, {"resolve", "-h"}, {"plan", "--help"},
                                              {"quantize", "-h"}, {"quantize-tensor", "--help"}}) {
    INFO(Catch::Detail::stringify(args));
    const auto r = run_qpolicy(args);
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Catch::StartsWith("usage: qpolicy resolve"));
    CHECK(r.err.empty());
  }
  // cli.md: usage errors exit 1 (with the usage text), like every other malformed command line.
  struct usage {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<usage> cases{
      {{"resolve", "-q", "fp8_per_block", "-q", "fp8_per_tensor"}, "error: -q is given twice; it takes one value"},
      {{"resolve", "--quantization=fp8_per_block", "-q", "fp8_per_tensor"}, "error: -q is given twice"},
      {{"resolve", "-c", "{}", "--quantization-config", "{}"}, "error: -c is given twice"},
      {{"plan", "--model", "a.json", "--model", "b.json"}, "error: --model is given twice"},
      {{"quantize", "-o", "a", "-o", "b", "in.safetensors"}, "error: -o is given twice"},
      {{"quantize", "--output", "a", "--config-out", "c", "--config-out", "d", "in"}, "error: --config-out is given twice"},
      {{"quantize-tensor", "--key", "fp8_per_token", "--key", "fp8_per_tensor_static", "x", "-o", "y"}, "error: --key is given twice"},
      {{"plan", "-q", "fp8_per_block", "--model", "m.json", "--tp", "8"}, "error: --tp only applies to --check-shapes"},
  };
  for (const auto& c : cases) {
    INFO(Catch::Detail::stringify(c.args));
    const auto r = run_qpolicy(c.args);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::StartsWith(c.message));
  }
}

/// A CPU target of the other architecture, which this CPU never runs.
std::string foreign_target() { return qpolicy::cpu::cpu_target_covers(qpolicy::cpu::cpu_target::neon) ? "avx2" : "neon"; }

/// The targets this CPU runs, as the refusal lists them.
std::string attained_targets() {
  std::string out;
  for (auto t : qpolicy::cpu::attained_cpu_targets()) out += (out.empty() ? "" : ", ") + std::string(qpolicy::cpu::name_of(t));
  return out;
}

TEST_CASE("environment settings that would be misread are refused before any work", "[hostile][cli]") {
  temp_dir d("hostile-env");
  write_file(d / "in.safetensors", small_checkpoint());
  const auto before = list(d.path());
  struct setting {
    std::string assignment, message;
  };
  const std::vector<setting> cases{
      {"QPOLICY_CPU_TARGET=fast", "error: QPOLICY_CPU_TARGET is 'fast'; expected one of 'scalar', 'sse4', 'avx2', 'avx3', "
                                  "'avx3_zen4', 'avx3_spr', 'neon', 'sve', 'sve2'"},
      {"QPOLICY_CPU_TARGET=AVX2", "error: QPOLICY_CPU_TARGET is 'AVX2'; expected one of 'scalar', 'sse4', 'avx2', 'avx3', "
                                  "'avx3_zen4', 'avx3_spr', 'neon', 'sve', 'sve2'"},
      {"QPOLICY_CPU_TARGET=" + foreign_target(), "error: QPOLICY_CPU_TARGET is '" + foreign_target() +
                                                     "', a target this CPU does not run; it runs " + attained_targets()},
      {"QPOLICY_PROGRESS_INTERVAL=5s", "error: QPOLICY_PROGRESS_INTERVAL is '5s'; expected a number of seconds, 0 or more"},
      {"QPOLICY_PROGRESS_INTERVAL=-1", "error: QPOLICY_PROGRESS_INTERVAL is '-1'; expected a number of seconds, 0 or more"},
      {"QPOLICY_PROGRESS_INTERVAL=nan", "error: QPOLICY_PROGRESS_INTERVAL is 'nan'; expected a number of seconds, 0 or more"},
  };
  for (const auto& c : cases) {
    INFO(c.assignment);
    const auto r = qpolicy::test::run_process(
        {"/usr/bin/env", c.assignment, exe(), "quantize", "-q", "fp8_per_tensor", "-o", d / "out.safetensors", d / "in.safetensors"}, 60);
    check_refused(r, 1, c.message, d.path(), before);
    CHECK_THAT(r.err, Catch::StartsWith(c.message));
  }
  // The values it reads (every CPU target this CPU runs, and empty: the best): the run completes, the
  // same bytes every time.
  std::string first;
  std::vector<std::string> assignments{"QPOLICY_CPU_TARGET="};
  for (auto t : qpolicy::cpu::attained_cpu_targets()) assignments.push_back("QPOLICY_CPU_TARGET=" + std::string(qpolicy::cpu::name_of(t)));
  assignments.push_back("QPOLICY_PROGRESS_INTERVAL=0.5");
  for (const std::string& assignment : assignments) {
    INFO(assignment);
    const auto r = qpolicy::test::run_process(
        {"/usr/bin/env", assignment, exe(), "quantize", "-q", "fp8_per_channel", "-o", d / "out.safetensors", d / "in.safetensors"}, 60);
    CHECK(r.status == 0);
    const auto bytes = read_file(d / "out.safetensors");
    if (first.empty()) first = bytes;
    CHECK(bytes == first);
  }
}

TEST_CASE("a 600 000-character expert tensor name is parsed, not a stack overflow", "[hostile][sizes]") {
  temp_dir d("hostile-longname");
  std::string name = "m.";
  for (int i = 0; i < 300000; ++i) name += "a.";
  name += "experts.0.gate_proj.weight";
  write_file(d / "in.safetensors", safetensors(R"({")" + name + R"(": {"dtype": "BF16", "shape": [4, 16], "data_offsets": [0, 128]}})",
                                               std::string(128, '\x3c')));
  const auto before = list(d.path());
  // std::regex recursed once per character here and crashed (exit 139); the name's layer lacks up_proj.
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", d / "out.safetensors", d / "in.safetensors"}), 2,
                "experts.0.up_proj.weight'", d.path(), before);
}

TEST_CASE("on exit 2 the error line is stderr's first; notes and warnings follow it", "[hostile][cli]") {
  temp_dir d("hostile-first-line");
  // quantize-tensor: a tensor it leaves out (a note), then nothing to quantize.
  write_file(d / "bias.safetensors", safetensors(R"({"b": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}})", std::string(8, '\x3c')));
  auto before = list(d.path());
  auto r = run_qpolicy({"quantize-tensor", "--key", "fp8_per_tensor_static", d / "bias.safetensors", "-o", d / "out.safetensors"});
  check_refused(r, 2, "no 2-D bf16/fp16/fp32 tensor to quantize", d.path(), before);
  CHECK(r.err.starts_with("error: "));
  CHECK_THAT(r.err, Catch::Contains("\nnote: b (BF16, 1-D) is not a 2-D bf16/fp16/fp32 tensor; left out"));
  // quantize: a duplicate key in the config (a warning), then a weight holding NaN.
  std::string nan;
  for (int i = 0; i < 4 * 16; ++i) nan += std::string{'\xc0', '\x7f'};
  write_file(d / "nan.safetensors", safetensors(R"({"m.layers.0.mlp.down_proj.weight": {"dtype": "BF16", "shape": [4, 16], "data_offsets": [0, 128]}})", nan));
  before = list(d.path());
  r = run_qpolicy({"quantize", "-q", "online", "-c", R"({"linear": "fp8_per_tensor", "linear": "fp8_per_tensor"})", d / "nan.safetensors", "-o",
                   d / "out.safetensors"});
  check_refused(r, 2, "NaN or infinite values", d.path(), before);
  CHECK(r.err.starts_with("error: "));
  CHECK_THAT(r.err, Catch::Contains("\nwarning: duplicate key 'linear'"));
}
