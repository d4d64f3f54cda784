// `qpolicy quantize` with the low-precision schemes: the compressed-tensors tensors and config groups
// llm-compressor writes for them (tests/witness_hf compares against llm-compressor and decompresses
// with compressed-tensors), holding exactly the codes and scales of the online formulas -- the
// quantize-tensor kernels applied to the whole weight, or to an expert's gate and up together (w13)
// for NVFP4's shared global scale.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "../support/checkpoint_fixture.hpp"
#include "../support/files.hpp"
#include "../support/process.hpp"
#include "../support/temp_dir.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/io/safetensors.hpp"

namespace st = qpolicy::safetensors;
namespace fs = std::filesystem;
namespace json = boost::json;
using qpolicy::schemes::formula;

namespace {

qpolicy::test::process_result run(std::vector<std::string> args) { return qpolicy::test::run_qpolicy(std::move(args)); }

/// A model directory holding the synthetic Qwen3-MoE checkpoint in one file.
fs::path make_model_dir(const fs::path& root, const std::vector<qpolicy::test::tensor>& ts) {
  const auto d = root / "model";
  fs::create_directories(d);
  qpolicy::test::write_bf16_checkpoint(ts, (d / "model.safetensors").string());
  std::ofstream(d / "config.json") << "{\"architectures\": [\"Qwen3MoeForCausalLM\"]}\n";
  return d;
}

/// One output tensor: its type, shape and bytes.
struct stored {
  st::dtype type;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};
std::map<std::string, stored> tensors_of(const fs::path& file) {
  std::map<std::string, stored> out;
  st::file f(file.string());
  for (const auto& t : f.tensors()) {
    const auto d = f.data(t);
    const auto* p = reinterpret_cast<const std::uint8_t*>(d.data());
    out[t.name] = {t.type, t.shape, std::vector<std::uint8_t>(p, p + d.size())};
  }
  return out;
}

/// The online formula on a bf16 weight (the rows of `parts` stacked: an expert's w13).
std::vector<qpolicy::stored_part> online(formula f, const std::vector<const qpolicy::test::tensor*>& parts) {
  std::vector<std::uint16_t> rows;
  std::int64_t n = 0;
  for (const auto* t : parts) {
    rows.insert(rows.end(), t->bf16.begin(), t->bf16.end());
    n += t->shape[0];
  }
  return qpolicy::quantize_tensor_parts(f, {rows.data(), qpolicy::element::bf16, n, parts[0]->shape[1]}, {});
}

std::vector<std::uint8_t> slice(const std::vector<std::uint8_t>& v, std::size_t from, std::size_t n) {
  return {v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(from + n)};
}

struct formula_case {
  const char* config;  // the quantization_config
  qpolicy::schemes::formula formula;
  const char* format;  // the config group's format
  bool linear;         // whether the attention projections are quantized too
  bool activations;    // whether the group has input_activations
};

}  // namespace

TEST_CASE("quantize writes the low-precision schemes in compressed-tensors' formats, with the online formulas' bits",
          "[checkpoint][quantize][dir][low-precision]") {
  const auto c = GENERATE(values<formula_case>({
      {R"({"linear": "mxfp8", "moe": "mxfp8"})", formula::mxfp8_torch, "mxfp8-quantized", true, true},
      {R"({"linear": "mxfp4", "moe": "mxfp4"})", formula::mxfp4_even, "mxfp4-pack-quantized", true, true},
      {R"({"moe": "int8_per_channel_weight_only"})", formula::int8_per_channel, "pack-quantized", false, false},
      {R"({"moe": "nvfp4_per_token"})", formula::nvfp4_weight, "nvfp4-pack-quantized", false, false},
  }));
  INFO(c.config);
  const qpolicy::test::temp_dir tmp("lp-checkpoint");
  const auto ts = qpolicy::test::synthetic();
  const auto in = make_model_dir(tmp.path(), ts);
  const auto out = tmp.path() / "out";
  const auto r = run({"quantize", "-q", "online", "-c", c.config, in.string(), "-o", out.string()});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.err, Catch::Contains("format: compressed-tensors"));
  CHECK((r.err.find("no per-token NVFP4 activations") != std::string::npos) == (c.formula == formula::nvfp4_weight));

  // The config group, as llm-compressor writes it for the matching preset.
  const auto qc = json::parse(qpolicy::test::slurp(out / "config.json")).as_object().at("quantization_config").as_object();
  CHECK(qc.at("format") == c.format);
  const auto& groups = qc.at("config_groups").as_object();
  REQUIRE(groups.size() == 1);
  const auto& group = groups.at("group_0").as_object();
  CHECK(group.at("format") == c.format);
  CHECK(group.at("input_activations").is_null() == !c.activations);
  const auto& w = group.at("weights").as_object();
  const bool int8 = c.formula == formula::int8_per_channel, nvfp4 = c.formula == formula::nvfp4_weight;
  CHECK(w.at("type") == (int8 ? "int" : "float"));
  CHECK(w.at("num_bits") == (c.formula == formula::mxfp8_torch || int8 ? 8 : 4));
  CHECK(w.at("strategy") == (int8 ? "channel" : nvfp4 ? "tensor_group" : "group"));
  CHECK(w.at("scale_dtype") == (int8 ? json::value(nullptr) : json::value(nvfp4 ? "torch.float8_e4m3fn" : "torch.uint8")));
  const auto& ignore = qc.at("ignore").as_array();
  CHECK((std::find(ignore.begin(), ignore.end(), json::value("model.layers.0.self_attn.q_proj")) != ignore.end()) == !c.linear);

  // Every tensor: quantized ones hold the online formula's codes and scales, the rest the input's bytes.
  const auto got = tensors_of(out / "model.safetensors");
  std::map<std::string, const qpolicy::test::tensor*> by_name;
  for (const auto& t : ts) by_name[t.name] = &t;
  std::size_t quantized = 0;
  for (const auto& t : ts) {
    const auto base = t.name.substr(0, t.name.size() - 7);  // without ".weight"
    const bool expert = t.name.find(".experts.") != std::string::npos;
    const bool attention = t.name.find("self_attn.") != std::string::npos && t.shape.size() == 2;
    if (!(expert || (attention && c.linear))) {
      REQUIRE(got.count(t.name));
      CHECK(got.at(t.name).bytes == std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t*>(t.bf16.data()),
                                                              reinterpret_cast<const std::uint8_t*>(t.bf16.data() + t.bf16.size())));
      continue;
    }
    INFO(t.name);
    ++quantized;
    const std::int64_t rows = t.shape[0], cols = t.shape[1];
    const auto& scale = got.at(base + ".weight_scale");
    if (nvfp4) {
      // The online path quantizes an expert's gate and up as one matrix (w13): one global scale.
      const bool w13 = t.name.find("down_proj") == std::string::npos;
      const auto expert_base = base.substr(0, base.rfind('.') + 1);
      const auto gate = by_name.at(expert_base + "gate_proj.weight"), up = by_name.at(expert_base + "up_proj.weight");
      const auto parts = w13 ? online(c.formula, {gate, up}) : online(c.formula, {&t});
      const std::size_t skip = w13 && t.name.find("up_proj") != std::string::npos ? static_cast<std::size_t>(gate->shape[0]) : 0;
      CHECK(got.at(base + ".weight_packed").bytes == slice(parts[0].bytes, skip * cols / 2, static_cast<std::size_t>(rows * cols / 2)));
      CHECK(scale.type == st::dtype::F8_E4M3);
      CHECK(scale.bytes == slice(parts[1].bytes, skip * cols / 16, static_cast<std::size_t>(rows * cols / 16)));
      // compressed-tensors' global scale is the encode scale; vLLM's weight_scale_2 is its reciprocal.
      float gs, scale_2;
      std::memcpy(&gs, got.at(base + ".weight_global_scale").bytes.data(), 4);
      std::memcpy(&scale_2, parts[2].bytes.data(), 4);
      CHECK(1.0f / gs == scale_2);
      continue;
    }
    const auto parts = online(c.formula, {&t});
    if (int8) {
      // pack-quantized at 8 bits: code + 128 in each byte of the int32s; the scale in the model dtype.
      auto& packed = got.at(base + ".weight_packed");
      CHECK(packed.type == st::dtype::I32);
      CHECK(packed.shape == std::vector<std::int64_t>{rows, cols / 4});
      for (std::size_t i = 0; i < packed.bytes.size(); ++i)
        if (packed.bytes[i] != (parts[0].bytes[i] ^ 0x80u)) FAIL("code " << i << " differs");
      CHECK(scale.type == st::dtype::BF16);
      CHECK(scale.shape == std::vector<std::int64_t>{rows, 1});
      for (std::int64_t i = 0; i < rows; ++i) {
        float s;
        std::memcpy(&s, parts[1].bytes.data() + i * 4, 4);
        std::uint16_t h;
        std::memcpy(&h, scale.bytes.data() + i * 2, 2);
        CHECK(qpolicy::fp8::from_bf16(h) == s);
      }
      std::int64_t shape[2];
      std::memcpy(shape, got.at(base + ".weight_shape").bytes.data(), sizeof shape);
      CHECK((shape[0] == rows && shape[1] == cols));
      continue;
    }
    const bool mxfp8 = c.formula == formula::mxfp8_torch;
    const auto& codes = got.at(base + (mxfp8 ? ".weight" : ".weight_packed"));
    CHECK(codes.type == (mxfp8 ? st::dtype::F8_E4M3 : st::dtype::U8));
    CHECK(codes.bytes == parts[0].bytes);
    CHECK(scale.type == st::dtype::U8);
    CHECK(scale.shape == std::vector<std::int64_t>{rows, cols / 32});
    CHECK(scale.bytes == parts[1].bytes);
  }
  CHECK(quantized == (c.linear ? 32u : 24u));
}

TEST_CASE("quantize refuses a low-precision plan a checkpoint format cannot express", "[checkpoint][quantize][dir][low-precision]") {
  const qpolicy::test::temp_dir tmp("lp-checkpoint-refusals");
  const auto in = make_model_dir(tmp.path(), qpolicy::test::synthetic());
  const auto out = tmp.path() / "out";
  auto r = run({"quantize", "-q", "online", "-c", R"({"linear": "mxfp8"})", "--format", "vllm-fp8", in.string(), "-o", out.string()});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("is planned as mxfp8, which --format vllm-fp8 cannot express") &&
                        Catch::Contains("--format compressed-tensors can (mxfp8-quantized)"));
  // vLLM 0.34 refuses this activation in the plan; 0.33 refuses explicit activations; MXFP4 takes one in
  // 0.34, and the checkpoint cannot say it.
  r = run({"quantize", "-q", "online", "-c", R"({"linear": {"weight": "mxfp8", "activation": "fp8_per_token"}})", in.string(), "-o",
           out.string()});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("activation override is not supported for online Mxfp8OnlineLinearMethod"));
  r = run({"quantize", "-q", "online", "-c", R"({"linear": {"weight": "mxfp4", "activation": "fp8_per_token"}})", in.string(), "-o",
           out.string()});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("planned with fp8_per_token activations, which a checkpoint cannot express with mxfp4 weights"));
  // LUT-B runs online in vLLM only: no checkpoint format holds it. Refused by name, nothing written.
  r = run({"quantize", "-q", "lut_b_moe", in.string(), "-o", out.string()});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("is planned as lut_b_moe, but no checkpoint format holds LUT-B tiles"));
  CHECK_FALSE(fs::exists(out));

  // Two schemes: one config group each, the top-level format mixed-precision (compressed-tensors').
  r = run({"quantize", "-q", "online", "-c", R"({"linear": "mxfp8", "moe": "int8_per_channel_weight_only"})", in.string(), "-o",
           out.string()});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto qc = json::parse(qpolicy::test::slurp(out / "config.json")).as_object().at("quantization_config").as_object();
  CHECK(qc.at("format") == "mixed-precision");
  const auto& groups = qc.at("config_groups").as_object();
  REQUIRE(groups.size() == 2);
  CHECK(groups.at("group_0").at("format") == "mxfp8-quantized");
  CHECK(groups.at("group_1").at("format") == "pack-quantized");
  CHECK(groups.at("group_1").at("targets").as_array().front() == "re:^model\\.layers\\.0\\.mlp\\.experts\\.\\d+\\.(gate_proj|up_proj|down_proj|w1|w2|w3)$");
}

namespace {

/// The transform scheme `name` of a checkpoint's transform_config, its two TransformArgs checked: the
/// input rotated online, the weights offline (weight_input, inverse), both on `targets` less `ignored`.
const json::object& checked_transform(const json::object& qc, const std::string& name, std::int64_t size,
                                      const json::array& targets, bool ignore_unquantized) {
  const auto& scheme = qc.at("transform_config").at("config_groups").at(name).as_object();
  CHECK(scheme.at("type") == "hadamard");
  CHECK(scheme.at("head_dim") == size);
  CHECK(scheme.at("precision") == "torch.float32");
  CHECK(scheme.at("randomize") == false);
  const auto& apply = scheme.at("apply").as_array();
  REQUIRE(apply.size() == 2);
  const char* locations[] = {"input", "weight_input"};
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& a = apply[i].as_object();
    CHECK(a.at("location") == locations[i]);
    CHECK(a.at("inverse") == (i == 1));
    CHECK(a.at("targets").as_array() == targets);
    CHECK(a.at("ignore").as_array() == (ignore_unquantized ? qc.at("ignore").as_array() : json::array{}));
  }
  return scheme;
}

/// A stored transform weight: F32 [n, n], the unnormalized Sylvester matrix.
void check_sylvester(const stored& t, std::int64_t n) {
  CHECK(t.type == st::dtype::F32);
  REQUIRE(t.shape == std::vector<std::int64_t>{n, n});
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float v;
      std::memcpy(&v, t.bytes.data() + (i * n + j) * 4, 4);
      if (v != (std::popcount(static_cast<std::uint64_t>(i & j)) % 2 ? -1.0f : 1.0f)) FAIL("entry " << i << ", " << j << " is " << v);
    }
}

}  // namespace

TEST_CASE("quantize writes rotated MXFP4 layers as llm-compressor's QuIP transform_config with the rotated weights' codes",
          "[checkpoint][quantize][dir][low-precision]") {
  const qpolicy::test::temp_dir tmp("lp-checkpoint-rotated");
  const auto ts = qpolicy::test::synthetic();
  const auto in = make_model_dir(tmp.path(), ts);
  std::map<std::string, const qpolicy::test::tensor*> by_name;
  for (const auto& t : ts) by_name[t.name] = &t;
  // Every rotated weight holds the rotating formula's codes and scales at its layer's size.
  auto check_codes = [&](const std::map<std::string, stored>& got, const std::string& module, std::int64_t size) {
    INFO(module);
    const auto& t = *by_name.at(module + ".weight");
    qpolicy::tensor_quant_options o;
    o.transform_size = size;
    const auto parts = qpolicy::quantize_tensor_parts(formula::mxfp4_hadamard_weight, {t.bf16.data(), qpolicy::element::bf16, t.shape[0], t.shape[1]}, o);
    CHECK(got.at(module + ".weight_packed").bytes == parts[0].bytes);
    CHECK(got.at(module + ".weight_scale").bytes == parts[1].bytes);
    // Not MXFP4 of the unrotated weight.
    CHECK(got.at(module + ".weight_packed").bytes != online(formula::mxfp4_even, {&t})[0].bytes);
  };

  SECTION("-q mxfp4_hadamard32: every quantized module rotated, one scheme 'v' on Linear less the ignored") {
    const auto out = tmp.path() / "out";
    const auto r = run({"quantize", "-q", "mxfp4_hadamard32", in.string(), "-o", out.string()});
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.err, Catch::Contains("rotation: Hadamard 32 on the input of 8 modules (transform_config scheme 'v', weight "
                                      "model.layers.0.self_attn.q_proj.v_input.weight)"));
    const auto qc = json::parse(qpolicy::test::slurp(out / "config.json")).as_object().at("quantization_config").as_object();
    CHECK(qc.at("config_groups").at("group_0").at("format") == "mxfp4-pack-quantized");
    checked_transform(qc, "v", 32, json::array{"Linear"}, true);
    CHECK(qc.at("transform_config").at("config_groups").as_object().size() == 1);
    const auto& ignore = qc.at("ignore").as_array();
    CHECK(std::find(ignore.begin(), ignore.end(), json::value("lm_head")) != ignore.end());
    CHECK(std::find(ignore.begin(), ignore.end(), json::value("model.layers.1.mlp.gate")) != ignore.end());
    const auto got = tensors_of(out / "model.safetensors");
    std::size_t transforms = 0;
    for (const auto& [name, t] : got) transforms += name.find("_input.weight") != std::string::npos;
    CHECK(transforms == 1);
    check_sylvester(got.at("model.layers.0.self_attn.q_proj.v_input.weight"), 32);
    for (int l = 0; l < 2; ++l)
      for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"})
        check_codes(got, "model.layers." + std::to_string(l) + ".self_attn." + proj, 32);
    // plan --model-dir reads the directory back: the transform weight is no layer, the rotated layers are kept.
    const auto plan = run({"plan", "--model-dir", out.string(), "--format", "json"});
    INFO(plan.err);
    REQUIRE(plan.status == 0);
    const auto layers = json::parse(plan.out).at("layers").as_array();
    CHECK(layers.size() == 10);  // embeddings, 2 x (qkv, o, router, experts), LM head
    std::size_t kept = 0;
    for (const auto& l : layers) kept += l.at("composition") == "kept";
    CHECK(kept == 4);
    // The experts stay bf16, byte for byte.
    const auto& e = *by_name.at("model.layers.1.mlp.experts.3.down_proj.weight");
    CHECK(got.at(e.name).bytes == std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t*>(e.bf16.data()),
                                                            reinterpret_cast<const std::uint8_t*>(e.bf16.data() + e.bf16.size())));
  }

  SECTION("targets with two sizes: one scheme per size, each naming its modules") {
    const auto out = tmp.path() / "out2";
    const auto r = run({"quantize", "-q", "online", "-c",
                        R"({"targets": {"re:.*layers\\.1\\.self_attn\\..*": {"weight": "mxfp4", "hadamard_size": 64},
                                        "re:.*layers\\.0\\.self_attn\\.o_proj": {"weight": "mxfp4", "hadamard_size": 32},
                                        "re:.*layers\\.0\\.self_attn\\.[qkv]_proj": "mxfp4"}})",
                        in.string(), "-o", out.string()});
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto qc = json::parse(qpolicy::test::slurp(out / "config.json")).as_object().at("quantization_config").as_object();
    CHECK(qc.at("transform_config").at("config_groups").as_object().size() == 2);
    checked_transform(qc, "v32", 32, json::array{"model.layers.0.self_attn.o_proj"}, false);
    checked_transform(qc, "v64", 64,
                      json::array{"model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.k_proj", "model.layers.1.self_attn.v_proj",
                                  "model.layers.1.self_attn.o_proj"},
                      false);
    const auto got = tensors_of(out / "model.safetensors");
    check_sylvester(got.at("model.layers.0.self_attn.o_proj.v32_input.weight"), 32);
    check_sylvester(got.at("model.layers.1.self_attn.q_proj.v64_input.weight"), 64);
    check_codes(got, "model.layers.0.self_attn.o_proj", 32);
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"}) check_codes(got, std::string("model.layers.1.self_attn.") + proj, 64);
    // The unrotated MXFP4 layer: the plain formula, no transform.
    const auto& q0 = *by_name.at("model.layers.0.self_attn.q_proj.weight");
    CHECK(got.at("model.layers.0.self_attn.q_proj.weight_packed").bytes == online(formula::mxfp4_even, {&q0})[0].bytes);
    CHECK_FALSE(got.count("model.layers.0.self_attn.q_proj.v32_input.weight"));
  }

  SECTION("a Hadamard size that does not divide K: vLLM's message, nothing written") {
    const auto out = tmp.path() / "out3";
    const auto r = run({"quantize", "-q", "online", "-c", R"({"linear": {"weight": "mxfp4", "hadamard_size": 512}})", in.string(), "-o",
                        out.string()});
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::Contains("Input size per partition 256 is not divisible by the Hadamard size 512. (tensor "
                                      "'model.layers.0.self_attn.q_proj.weight' of layer model.layers.0.self_attn.qkv_proj)"));
    CHECK_FALSE(fs::exists(out));
  }
}
