#pragma once
// Model directories of already-quantized checkpoints for the checkpoint suites, and the helpers that run
// `qpolicy quantize` on them and read what it wrote: the synthetic Qwen3-MoE model in bf16 and quantized,
// gpt-oss's fused MXFP4 experts, ModelOpt NVFP4.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "checkpoint_fixture.hpp"
#include "files.hpp"
#include "process.hpp"
#include "reference_decode.hpp"
#include "test_inputs.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/io/safetensors.hpp"

namespace qpolicy::test::quantized_dirs {

namespace st = qpolicy::safetensors;
namespace fs = std::filesystem;
namespace json = boost::json;
using qpolicy::schemes::formula;

inline qpolicy::test::process_result run(std::vector<std::string> args) { return qpolicy::test::run_qpolicy(std::move(args)); }

/// Runs a command that must succeed.
inline std::string ok(std::vector<std::string> args) {
  const auto r = run(std::move(args));
  INFO(r.err);
  REQUIRE(r.status == 0);
  return r.err;
}

/// The synthetic Qwen3-MoE model (bf16) as a model directory.
inline fs::path bf16_dir(const fs::path& root) {
  const auto d = root / "bf16";
  fs::create_directories(d);
  qpolicy::test::write_bf16_checkpoint(qpolicy::test::synthetic(), (d / "model.safetensors").string());
  std::ofstream(d / "config.json") << "{\n  \"model_type\": \"qwen3_moe\",\n  \"torch_dtype\": \"bfloat16\"\n}\n";
  return d;
}

/// `name` under `root`: the synthetic bf16 model quantized online with `config` (an already-quantized input).
inline fs::path quantized_input(const fs::path& bf16, const fs::path& root, const std::string& name, const std::string& config) {
  const auto d = root / name;
  ok({"quantize", "-q", "online", "-c", config, bf16.string(), "-o", d.string()});
  return d;
}

/// Every tensor of a directory's model.safetensors: name -> (dtype, shape, bytes).
struct stored {
  st::dtype type;
  std::vector<std::int64_t> shape;
  std::string bytes;
};
inline std::map<std::string, stored> tensors_of(const fs::path& dir) {
  std::map<std::string, stored> out;
  st::file f((dir / "model.safetensors").string());
  for (const auto& t : f.tensors()) {
    const auto d = f.data(t);
    out[t.name] = {t.type, t.shape, std::string(reinterpret_cast<const char*>(d.data()), d.size())};
  }
  return out;
}

/// Writes model directory `d`: `tensors` as `change` leaves them (it edits a spec and its bytes, or
/// returns false to leave one out) in one model.safetensors, and config.json with `config`.
template <class Change>
fs::path write_dir(const fs::path& d, const std::map<std::string, stored>& tensors, Change&& change, const std::string& config) {
  fs::create_directories(d);
  std::vector<st::tensor_spec> specs;
  std::vector<std::string> data;
  for (const auto& [n, t] : tensors) {
    st::tensor_spec s{n, t.type, t.shape};
    std::string bytes = t.bytes;
    if (!change(s, bytes)) continue;
    specs.push_back(s);
    data.push_back(bytes);
  }
  st::file_writer w((d / "model.safetensors").string(), specs, {});
  for (const auto& b : data) w.write(std::as_bytes(std::span(b.data(), b.size())));
  w.finish();
  std::ofstream(d / "config.json") << config;
  return d;
}

inline json::object quantization_config(const fs::path& dir) {
  return json::parse(qpolicy::test::slurp(dir / "config.json")).as_object().at("quantization_config").as_object();
}

template <class T>
std::vector<T> values(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

/// What the online formula `f` stores for `module`'s weight decoded (as bf16) from `decoder`'s stored
/// tensors: the codes and the scales.
inline std::pair<std::string, std::string> requantized(formula decoder, const std::map<std::string, stored>& in, const std::string& codes,
                                                const std::string& scales, const float* second, std::int64_t rows, std::int64_t cols,
                                                formula f) {
  // The decode written from the formats (tests/support), not the library's decoder.
  const auto& code_bytes = in.at(codes).bytes;
  const auto& scale_bytes = in.at(scales).bytes;
  const auto& row = qpolicy::schemes::formula_of(decoder);
  std::vector<std::uint16_t> w(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < cols; ++k)
      w[static_cast<std::size_t>(r * cols + k)] = qpolicy::test::bf16_of(qpolicy::test::reference_element(
          row, reinterpret_cast<const std::uint8_t*>(code_bytes.data()), reinterpret_cast<const std::uint8_t*>(scale_bytes.data()),
          reinterpret_cast<const std::uint8_t*>(second), r, k, cols));
  const auto parts = qpolicy::quantize_tensor_parts(f, {w.data(), qpolicy::element::bf16, rows, cols}, {});
  return {std::string(parts[0].bytes.begin(), parts[0].bytes.end()), std::string(parts[1].bytes.begin(), parts[1].bytes.end())};
}

/// A quantized input converted with `config` into `out`, and the bf16 model converted with the same config
/// (compressed-tensors) into `direct`: the conversion's stderr and both outputs' tensors.
struct beside_bf16 {
  std::string err;
  std::map<std::string, stored> got, want;
};
inline beside_bf16 convert_beside_bf16(const fs::path& input, const fs::path& bf16, const fs::path& out, const fs::path& direct, const std::string& config) {
  beside_bf16 r;
  r.err = ok({"quantize", "-c", config, input.string(), "-o", out.string()});
  ok({"quantize", "-q", "online", "-c", config, "--format", "compressed-tensors", bf16.string(), "-o", direct.string()});
  r.got = tensors_of(out);
  r.want = tensors_of(direct);
  return r;
}

/// Runs `args INPUT -o OUT`, which must exit 2 with `message` on stderr and write nothing.
inline void refused(std::vector<std::string> args, const fs::path& input, const fs::path& out, const std::string& message) {
  args.insert(args.end(), {input.string(), "-o", out.string()});
  const auto r = run(args);
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains(message));
  CHECK(!fs::exists(out));
}

/// gpt-oss's layout at H 128, 4 experts of I 32 as model directory `root`/gpt-oss (quant_method mxfp4): bf16
/// attention, router and biases; each expert projection's MXFP4 codes in fused [E, N, K/32, 16] blocks with
/// [E, N, K/32] E8M0 scales.
inline fs::path gpt_oss_dir(const fs::path& root) {
  std::mt19937 rng(7);
  std::map<std::string, stored> tensors;
  auto add = [&](std::string name, st::dtype type, std::vector<std::int64_t> shape) {
    std::size_t n = 1;
    for (auto d : shape) n *= static_cast<std::size_t>(d);
    std::string bytes;
    if (type == st::dtype::BF16) {
      const auto v = qpolicy::test::random_bf16(n, 0.05f, rng);
      bytes.assign(reinterpret_cast<const char*>(v.data()), n * 2);
    } else {  // codes: any byte; E8M0 scales near 1
      const bool scales = name.ends_with("_scales");
      for (std::size_t i = 0; i < n; ++i) bytes.push_back(static_cast<char>(scales ? 120 + rng() % 10 : rng() % 256));
    }
    tensors[name] = {type, std::move(shape), std::move(bytes)};
  };
  add("model.embed_tokens.weight", st::dtype::BF16, {16, 128});
  for (int l = 0; l < 2; ++l) {
    const auto p = "model.layers." + std::to_string(l) + ".";
    add(p + "self_attn.q_proj.weight", st::dtype::BF16, {128, 128});
    add(p + "self_attn.k_proj.weight", st::dtype::BF16, {128, 128});
    add(p + "self_attn.v_proj.weight", st::dtype::BF16, {128, 128});
    add(p + "self_attn.o_proj.weight", st::dtype::BF16, {128, 128});
    add(p + "mlp.router.weight", st::dtype::BF16, {4, 128});
    add(p + "mlp.experts.gate_up_proj_blocks", st::dtype::U8, {4, 64, 4, 16});
    add(p + "mlp.experts.gate_up_proj_scales", st::dtype::U8, {4, 64, 4});
    add(p + "mlp.experts.gate_up_proj_bias", st::dtype::BF16, {4, 64});
    add(p + "mlp.experts.down_proj_blocks", st::dtype::U8, {4, 128, 1, 16});
    add(p + "mlp.experts.down_proj_scales", st::dtype::U8, {4, 128, 1});
    add(p + "mlp.experts.down_proj_bias", st::dtype::BF16, {4, 128});
  }
  add("lm_head.weight", st::dtype::BF16, {16, 128});
  const auto oss = write_dir(root / "gpt-oss", tensors, [](st::tensor_spec&, std::string&) { return true; },
                             R"({"model_type": "gpt_oss", "quantization_config": {"quant_method": "mxfp4", )"
                             R"("modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "lm_head"]}})");
  return oss;
}

/// The synthetic model's experts as ModelOpt NVFP4 stores them, as model directory `root`/modelopt: M.weight
/// packed, M.weight_scale e4m3, M.weight_scale_2 the decode multiplier (1 / compressed-tensors' global scale);
/// the attention and routers excluded. `bf16` is the synthetic model's directory.
inline fs::path modelopt_nvfp4_dir(const fs::path& bf16, const fs::path& root) {
  const auto nvfp4 = quantized_input(bf16, root, "nvfp4", R"({"moe": "nvfp4_per_token"})");
  const auto modelopt = write_dir(
      root / "modelopt", tensors_of(nvfp4),
      [](st::tensor_spec& s, std::string& bytes) {
        if (s.name.ends_with(".weight_packed")) s.name.replace(s.name.size() - 7, 7, "");
        if (s.name.ends_with(".weight_global_scale")) {
          s.name.replace(s.name.size() - 12, 12, "scale_2");
          const float inverse = 1.0f / values<float>(bytes).at(0);
          std::memcpy(bytes.data(), &inverse, 4);
        }
        return true;
      },
      R"({"model_type": "qwen3_moe", "torch_dtype": "bfloat16", "quantization_config": {"quant_method": "modelopt", "quantization": )"
      R"({"quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head", "*self_attn*", "*mlp.gate"]}}})");
  return modelopt;
}

}  // namespace qpolicy::test::quantized_dirs
