// Already-quantized checkpoints: their quantization_config read (fp8, compressed-tensors, gpt-oss's
// MXFP4, ModelOpt), each method's layer rules as vLLM's, the composition with an online config in every
// release (kept, requantized, online, unquantized, and the releases' errors), and `qpolicy plan
// --model-dir` on tiny checkpoints, the shared real model lists among them.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../support/checkpoint_fixture.hpp"
#include "../support/files.hpp"
#include "../support/process.hpp"
#include "../support/source_models.hpp"
#include "../support/temp_dir.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/io/model_dir_plan.hpp"
#include "qpolicy/plan/composed_plan.hpp"
#include "qpolicy/source/checkpoint_source.hpp"

namespace fs = std::filesystem;
namespace st = qpolicy::safetensors;
namespace json = boost::json;
namespace src = qpolicy::source;
using qpolicy::composition;
using src::method_class;

namespace {

src::checkpoint_source read(std::string_view qc, std::string_view model_type = "") {
  return src::read_checkpoint_source(json::parse(qc), model_type);
}

using qpolicy::test::moe_model;
using qpolicy::test::layer;

/// The config's online plan for `model`, composed with `checkpoint` in release `release`.
qpolicy::composed_plan composed(const src::checkpoint_source& checkpoint, const qpolicy::model_desc& model, const char* config,
                                qpolicy::vllm_release release) {
  qpolicy::config_request r;
  r.config_text = std::string(config);
  r.release = release;
  return qpolicy::compose(qpolicy::make_plan(qpolicy::resolve(r).config, model), model, checkpoint);
}

qpolicy::test::process_result run(std::vector<std::string> args) { return qpolicy::test::run_qpolicy(std::move(args)); }

/// A model directory: config.json with `quantization_config` (JSON text) and the tensors `specs` (zeros).
fs::path quantized_dir(const fs::path& root, std::string_view name, std::string_view qc, const std::vector<st::tensor_spec>& specs,
                       std::string_view model_type = "qwen3_moe") {
  const auto d = root / std::string(name);
  fs::create_directories(d);
  st::file_writer w((d / "model.safetensors").string(), specs, {});
  for (const auto& sp : specs) {
    std::size_t n = st::size_of(sp.type);
    for (const auto dim : sp.shape) n *= static_cast<std::size_t>(dim);
    w.write(std::vector<std::byte>(n));
  }
  w.finish();
  std::ofstream(d / "config.json") << "{\"model_type\": \"" << model_type << "\", \"quantization_config\": " << qc << "}\n";
  return d;
}

/// How the synthetic Qwen3-MoE checkpoint's weights are stored.
enum class stored_as { fp8_blocks, nvfp4_experts };

/// The synthetic Qwen3-MoE checkpoint (H 256, 4 experts of I 128, 2 blocks) stored as a quantized one:
/// vLLM's fp8 format (every linear layer and expert: F8_E4M3 weights, weight_scale_inv per 128x128 block), or
/// compressed-tensors' nvfp4-pack-quantized experts beside bf16 attention.
std::vector<st::tensor_spec> moe_specs(stored_as how) {
  std::vector<st::tensor_spec> out;
  for (const auto& t : qpolicy::test::synthetic()) {
    const bool weight = t.shape.size() == 2 && t.name.find("embed") == std::string::npos && t.name != "lm_head.weight" &&
                        t.name.find(".gate.weight") == std::string::npos;
    const bool expert = t.name.find(".experts.") != std::string::npos;
    const auto base = t.name.substr(0, t.name.size() - 7);
    const std::int64_t n = t.shape[0], k = t.shape.size() == 2 ? t.shape[1] : 0;
    if (weight && how == stored_as::fp8_blocks) {
      out.push_back({t.name, st::dtype::F8_E4M3, t.shape});
      out.push_back({base + ".weight_scale_inv", st::dtype::F32, {(n + 127) / 128, (k + 127) / 128}});
    } else if (weight && expert) {
      out.push_back({base + ".weight_packed", st::dtype::U8, {n, k / 2}});
      out.push_back({base + ".weight_scale", st::dtype::F8_E4M3, {n, k / 16}});
      out.push_back({base + ".weight_global_scale", st::dtype::F32, {1}});
    } else {
      out.push_back({t.name, st::dtype::BF16, t.shape});
    }
  }
  return out;
}

}  // namespace

TEST_CASE("checkpoint quantization_configs are read with vLLM's required fields and refusals", "[checkpoint][source]") {
  CHECK_THROWS_WITH(read(R"({"quant_method": "gptq", "bits": 4})"),
                    "the checkpoint's quantization_config has quant_method 'gptq', which this build does not read; it reads 'fp8', "
                    "'compressed-tensors', 'mxfp4' (gpt-oss), 'modelopt' (FP8, NVFP4 and MIXED_PRECISION) and 'quark'");
  CHECK_THROWS_WITH(read(R"({"bits": 4})"), "Cannot find any of ['quant_method'] in the model's quantization config.");
  CHECK_THROWS_WITH(read(R"({"quant_method": "fp8"})"), "Cannot find any of ['activation_scheme'] in the model's quantization config.");
  CHECK_THROWS_WITH(read(R"({"quant_method": "fp8", "activation_scheme": "sometimes"})"), "Unsupported activation scheme sometimes");
  CHECK_THROWS_WITH(read(R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128, 1]})"),
                    "The quantization block size of weight must have 2 dimensions, but got 3 dimensions");
  CHECK_THROWS_WITH(read(R"({"quant_method": "fp8", "activation_scheme": "static", "weight_block_size": [128, 128]})"),
                    "The block-wise quantization only supports dynamic activation scheme for now, but got static activation scheme.");
  CHECK_THROWS_WITH(read(R"({"quant_method": "modelopt", "quant_algo": "MXFP8"})"),
                    "the checkpoint's ModelOpt quant_algo is 'MXFP8', which this build does not read; it reads 'FP8', 'NVFP4' and 'MIXED_PRECISION'");
  CHECK_THROWS_WITH(read(R"({"quant_method": "modelopt", "quantization": {"exclude_modules": []}})"),
                    "Missing 'quant_algo' in quantization config");
  CHECK_THROWS_WITH(read(R"({"quant_method": "modelopt", "quant_algo": "FP8", "exclude_modules": "lm_head"})"),
                    "exclude_modules must be a list, got <class 'str'>");

  // fp8 falls back to modules_to_not_convert (transformers' key) when ignored_layers is empty.
  const auto f = read(R"({"quant_method": "fp8", "activation_scheme": "dynamic", "modules_to_not_convert": ["lm_head"],
                          "weight_block_size": [128, 128]})");
  CHECK(f.skipped == std::vector<std::string>{"lm_head"});
  CHECK(f.skipped_key == "modules_to_not_convert");
  // gpt-oss's MXFP4 is its own method only for model_type gpt_oss; ModelOpt's algorithm is upper-cased.
  CHECK(read(R"({"quant_method": "mxfp4"})", "gpt_oss").method == src::checkpoint_method::gpt_oss_mxfp4);
  CHECK(read(R"({"quant_method": "mxfp4"})", "llama").method == src::checkpoint_method::mxfp4);
  CHECK(read(R"({"quant_method": "modelopt", "quantization": {"quant_algo": "nvfp4", "exclude_modules": ["lm_head"]}})").method ==
        src::checkpoint_method::modelopt_fp4);
}

TEST_CASE("every field of a checkpoint's quantization_config the rules read is validated, naming the field", "[checkpoint][source]") {
  const std::string fp8 = R"({"quant_method": "fp8", "activation_scheme": "dynamic", )";
  const std::string block = "; expected two positive integers [block_n, block_k]: the rows and columns of a weight block, which the "
                            "weight's dimensions are divided by";
  CHECK_THROWS_WITH(read(fp8 + R"("weight_block_size": [128, 0]})"), "quantization_config.weight_block_size is [128,0]" + block);
  CHECK_THROWS_WITH(read(fp8 + R"("weight_block_size": [-128, 128]})"), "quantization_config.weight_block_size is [-128,128]" + block);
  CHECK_THROWS_WITH(read(fp8 + R"("weight_block_size": [128, 18446744073709551615]})"),
                    "quantization_config.weight_block_size is [128,18446744073709551615]" + block);
  CHECK_THROWS_WITH(read(fp8 + R"("weight_block_size": "128"})"),
                    "quantization_config.weight_block_size is '128'; expected a list of two positive integers [block_n, block_k]");
  CHECK_THROWS_WITH(read(fp8 + R"("store_dtype": 5})"), "quantization_config.store_dtype is 5; expected a storage dtype name such as 'mxfp4'");
  CHECK(read(fp8 + R"("store_dtype": "mxfp4"})").store_dtype == "mxfp4");

  // compressed-tensors' QuantizationArgs, as its pydantic model validates them.
  auto ct = [](std::string weights) {
    return read(R"({"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["Linear"], "weights": )" + weights + "}}}");
  };
  const std::string at = "quantization_config.config_groups.g.weights.";
  CHECK_THROWS_WITH(ct(R"({"num_bits": 4, "strategy": "group", "group_size": 0})"),
                    at + "group_size is 0: strategy group requires group_size to be set to a positive value");
  CHECK_THROWS_WITH(ct(R"({"num_bits": 4, "strategy": "tensor_group"})"),
                    at + "group_size is null: strategy tensor_group requires group_size to be set to a positive value");
  CHECK_THROWS_WITH(ct(R"({"num_bits": 4, "group_size": -2})"),
                    at + "group_size is -2; expected group_size > 0 for strategy='group' and group_size = -1 for 'channel'");
  CHECK_THROWS_WITH(ct(R"({"num_bits": 4, "group_size": 0})"),
                    at + "group_size is 0; expected group_size > 0 for strategy='group' and group_size = -1 for 'channel'");
  CHECK_THROWS_WITH(ct(R"({"num_bits": 4, "strategy": "channel", "group_size": 128})"),
                    at + "group_size is 128 with strategy channel: group_size requires strategy to be set to 'group'");
  CHECK_THROWS_WITH(ct(R"({"num_bits": 0})"), at + "num_bits is 0; expected a number of bits from 1 to 64");
  CHECK_THROWS_WITH(ct(R"({"num_bits": "four"})"), at + "num_bits is 'four'; expected a number of bits from 1 to 64");
  CHECK_THROWS_WITH(ct(R"({"num_bits": 4.5})"), at + "num_bits is 4.5E0; expected a number of bits from 1 to 64");
  CHECK(ct(R"({"num_bits": "4"})").groups.front().num_bits == 4);  // pydantic's lax int
  CHECK(ct(R"({"num_bits": 4.0})").groups.front().num_bits == 4);
  CHECK_THROWS_WITH(ct(R"({"type": "fp"})"), at + "type is 'fp'; expected 'int' or 'float'");
  CHECK_THROWS_WITH(ct(R"({"strategy": "rows"})"),
                    at + "strategy is 'rows'; expected one of 'tensor', 'channel', 'group', 'block', 'token', 'tensor_group' or 'attn_head'");
  CHECK_THROWS_WITH(ct(R"({"strategy": "block", "block_structure": [0, 128]})"),
                    at + "block_structure is [0,128]: Invalid block_structure '[0,128]'. Must be a list of positive ints [rows, cols].");
  CHECK_THROWS_WITH(ct(R"({"strategy": "block"})"), at + "strategy is block: Block strategy requires block structure");
  CHECK_THROWS_WITH(ct(R"({"strategy": "tensor", "block_structure": [128, 128]})"),
                    at + "block_structure is set with strategy tensor: Block structure requires block strategy");
  CHECK_THROWS_WITH(ct(R"({"dynamic": "sometimes"})"), at + "dynamic is 'sometimes'; expected true, false or 'local'");
  CHECK_THROWS_WITH(ct(R"({"strategy": "token"})"),
                    at + "strategy is token: Cannot perform static token quantization, please use `dynamic=True`");
  CHECK_THROWS_WITH(ct(R"({"symmetric": "yes"})"), at + "symmetric is 'yes'; expected true or false");
  CHECK_THROWS_WITH(ct("5"), "quantization_config.config_groups.g.weights is 5; expected an object of quantization arguments");
  // pydantic infers the strategy from group_size, and reads the older "RxC" block text.
  CHECK(ct(R"({"num_bits": 4, "group_size": 128})").groups.front().strategy == "group");
  CHECK(ct(R"({"num_bits": 4, "group_size": -1})").groups.front().strategy == "channel");
  CHECK(ct(R"({"num_bits": 8})").groups.front().strategy == "tensor");
  CHECK(ct(R"({"type": "FLOAT", "strategy": "block", "block_structure": "128x64"})").groups.front().block_structure ==
        std::array<std::int64_t, 2>{128, 64});

  // ModelOpt: group_size as vLLM's from_config takes it, and kv_cache_quant_algo a string.
  auto mo = [](std::string fields) {
    return read(R"({"quant_method": "modelopt", "quantization": {"quant_algo": "NVFP4", "exclude_modules": [], )" + fields + "}}");
  };
  CHECK_THROWS_WITH(mo(R"("group_size": 0)"),
                    "quantization_config.quantization.group_size is 0; expected a positive number of weights per NVFP4 scale (16)");
  CHECK_THROWS_WITH(mo(R"("group_size": "sixteen")"), "group_size must be an integer, got <class 'str'>");
  CHECK_THROWS_WITH(mo(R"("group_size": [16])"), "group_size must be an integer, got <class 'list'>");
  CHECK(mo(R"("group_size": "32")").group_size == 32);
  CHECK(mo(R"("group_size": null)").group_size == 16);
  CHECK_THROWS_WITH(mo(R"("kv_cache_quant_algo": 5)"), "kv_cache_quant_algo must be a string, got <class 'int'>");
}

TEST_CASE("each checkpoint method quantizes the layers vLLM's rules give it", "[checkpoint][source]") {
  const auto m = moe_model();
  SECTION("fp8: exact ignored names, fused shards that agree, experts by containment") {
    const auto s = read(R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
                            "ignored_layers": ["model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                                               "model.layers.0.self_attn.v_proj", "model.layers.1.mlp.experts.0.gate_proj",
                                               "model.layers.1.self_attn.q_proj", "lm_head"]})");
    CHECK(s.decide(m, layer(m, "model.layers.0.self_attn.qkv_proj")).cls == method_class::unquantized_linear);
    CHECK(s.decide(m, layer(m, "model.layers.0.self_attn.qkv_proj")).rule == "ignored_layers 'model.layers.0.self_attn.v_proj'");
    CHECK(s.decide(m, layer(m, "model.layers.0.self_attn.o_proj")).cls == method_class::fp8_linear);
    CHECK(s.decide(m, layer(m, "model.layers.0.mlp.experts")).cls == method_class::fp8_moe);
    CHECK(s.decide(m, layer(m, "model.layers.1.mlp.experts")).cls == method_class::unquantized_moe);
    CHECK(s.decide(m, layer(m, "lm_head")).cls == method_class::unquantized_linear);  // fp8 has no LM head method
    CHECK(*s.decide(m, layer(m, "model.layers.1.self_attn.qkv_proj")).error ==
          "Detected some but not all shards of model.layers.1.self_attn.qkv_proj are quantized. All shards of fused layers to have the "
          "same precision.");
  }
  SECTION("compressed-tensors: ignore, then names, fused shards, class names; Linear reaches the experts") {
    const auto s = read(R"({"quant_method": "compressed-tensors", "format": "float-quantized",
      "ignore": ["lm_head", "re:.*mlp.gate$", "model.layers.1.self_attn.o_proj"],
      "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {"type": "float", "num_bits": 8, "strategy": "block", "block_structure": [128, 128]},
                    "input_activations": {"type": "float", "num_bits": 8, "strategy": "group", "group_size": 128, "dynamic": true}},
        "group_1": {"targets": ["re:.*layers\\.1\\.mlp\\.experts.*"], "format": "nvfp4-pack-quantized",
                    "weights": {"type": "float", "num_bits": 4, "strategy": "tensor_group", "group_size": 16, "scale_dtype": "torch.float8_e4m3fn"}},
        "group_2": {"targets": ["model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.v_proj"],
                    "format": "pack-quantized", "weights": {"type": "int", "num_bits": 4, "strategy": "group", "group_size": 128}},
        "kv": {"targets": ["Attention"], "input_activations": {"num_bits": 8}}}})");
    CHECK(s.groups.size() == 3);  // the attention-only group is KV-cache quantization, dropped as vLLM does
    const auto qkv0 = s.decide(m, layer(m, "model.layers.0.self_attn.qkv_proj"));
    CHECK(qkv0.cls == method_class::ct_linear);
    CHECK(qkv0.rule == "config_groups.group_2 target 'model.layers.0.self_attn.q_proj'");  // every shard named
    CHECK(s.decide(m, layer(m, "model.layers.1.self_attn.qkv_proj")).rule == "config_groups.group_0 target 'Linear'");
    CHECK(s.decide(m, layer(m, "model.layers.1.self_attn.o_proj")).rule == "ignore 'model.layers.1.self_attn.o_proj'");
    CHECK(s.decide(m, layer(m, "model.layers.0.mlp.gate")).rule == "built without a quantization config");  // the router
    CHECK(s.decide(m, layer(m, "lm_head")).rule == "ignore 'lm_head'");
    const auto e0 = s.decide(m, layer(m, "model.layers.0.mlp.experts")), e1 = s.decide(m, layer(m, "model.layers.1.mlp.experts"));
    CHECK(e0.cls == method_class::ct_moe_w8a8_fp8);
    CHECK(e0.rule == "config_groups.group_0 target 'RoutedExperts'");
    CHECK(e1.cls == method_class::ct_moe_w4a4_nvfp4);
    CHECK(s.decide(m, layer(m, "lm_head")).cls == method_class::unquantized_linear);  // ignored
    CHECK(!s.decide(m, layer(m, "model.embed_tokens")).quantized());
  }
  SECTION("compressed-tensors: vLLM's errors for shards and experts that disagree") {
    const auto s = read(R"({"quant_method": "compressed-tensors", "ignore": ["model.layers.0.self_attn.q_proj", "re:.*experts\\.0\\.down_proj"],
      "config_groups": {"g": {"targets": ["Linear"], "format": "pack-quantized",
                              "weights": {"type": "int", "num_bits": 8, "strategy": "channel"}}}})");
    CHECK(*s.decide(m, layer(m, "model.layers.0.self_attn.qkv_proj")).error ==
          "Found different quantization schemes for the shards of model.layers.0.self_attn.qkv_proj. vLLM requires all to use the same scheme.");
    CHECK(*s.decide(m, layer(m, "model.layers.0.mlp.experts")).error ==
          "All MoE projections need to have same quantization scheme but found multiple");
    const auto wna16 = read(R"({"quant_method": "compressed-tensors", "format": "int-quantized",
      "config_groups": {"g": {"targets": ["Linear"], "weights": {"type": "int", "num_bits": 8, "strategy": "channel"}}}})");
    CHECK(*wna16.decide(m, layer(m, "model.layers.0.mlp.experts")).error ==
          "For Fused MoE layers, only format: pack-quantized and bits: [4, 8] is supported but got format: pack-quantized and bits: 8");
  }
  SECTION("gpt-oss's MXFP4: the experts only") {
    const auto s = read(R"({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"]})", "gpt_oss");
    CHECK(s.decide(m, layer(m, "model.layers.0.mlp.experts")).cls == method_class::mxfp4_moe);
    CHECK(s.decide(m, layer(m, "model.layers.0.self_attn.o_proj")).cls == method_class::unquantized_linear);
  }
  SECTION("ModelOpt: exclusions by name, containment and wildcard; NVFP4 experts") {
    const auto s = read(R"({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                            "ignore": ["lm_head", "model.layers.0.self_attn*", "layers.1.self_attn.o_proj"]})");
    CHECK(s.method == src::checkpoint_method::modelopt_fp4);
    CHECK(s.decide(m, layer(m, "lm_head")).rule == "ignore 'lm_head'");
    CHECK(s.decide(m, layer(m, "model.layers.0.self_attn.o_proj")).rule == "ignore 'model.layers.0.self_attn*'");
    CHECK(s.decide(m, layer(m, "model.layers.1.self_attn.o_proj")).rule == "ignore 'layers.1.self_attn.o_proj'");  // containment (older exports)
    CHECK(s.decide(m, layer(m, "model.layers.1.self_attn.qkv_proj")).cls == method_class::modelopt_linear);
    CHECK(s.decide(m, layer(m, "model.layers.1.mlp.experts")).cls == method_class::modelopt_nvfp4_moe);
  }
}

TEST_CASE("an online config composes with a quantized checkpoint as each release composes them", "[checkpoint][source][compose]") {
  using qpolicy::vllm_release;
  const auto m = moe_model();
  const auto fp8 = read(R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
                            "ignored_layers": ["model.layers.1.self_attn.o_proj"]})");
  const char* config = R"({"linear": "mxfp8", "moe": "fp8_per_block"})";
  auto kind_of = [&](const qpolicy::composed_plan& p, std::string_view name) {
    for (std::size_t i = 0; i < m.layers.size(); ++i)
      if (m.layers[i].name == name) return p.layers[i];
    FAIL("no layer " << name);
    throw;
  };
  // 0.30 and 0.31 refuse an online target on a checkpoint-quantized layer while building it.
  const auto p30 = composed(fp8, m, config, vllm_release::v0_30);
  REQUIRE(p30.first_error());
  CHECK_THAT(*p30.first_error(), Catch::StartsWith("Cannot apply requested online quantization ") &&
                                     Catch::EndsWith(" to pre-quantized layer model.layers.0.self_attn.qkv_proj: "
                                                     "<vllm.model_executor.layers.quantization.fp8.Fp8LinearMethod object at 0x...> was "
                                                     "already selected by the checkpoint quantization config."));
  CHECK(kind_of(p30, "model.layers.1.self_attn.o_proj").kind == composition::online);  // the checkpoint left it
  // 0.32 requantizes linear layers (Fp8LinearMethod cannot decode: a load error) and refuses experts.
  const auto p32 = composed(fp8, m, config, vllm_release::v0_32);
  CHECK(*p32.first_error() == "Requantizing checkpoint-quantized MoE layers is not supported.");
  CHECK(kind_of(p32, "model.layers.0.self_attn.qkv_proj").stage == qpolicy::error_stage::load);
  CHECK(p32.error_of(kind_of(p32, "model.layers.0.self_attn.qkv_proj")) ==
        "The quantization method <class 'vllm.model_executor.layers.quantization.fp8.Fp8LinearMethod'> does not implement dequantize_weight. "
        "Please open an issue.");
  // 0.33: both requantized, both fail to decode when the weights load.
  const auto p33 = composed(fp8, m, config, vllm_release::v0_33);
  CHECK(*p33.first_error() ==
        "The quantization method <class 'vllm.model_executor.layers.quantization.fp8.Fp8LinearMethod'> does not implement dequantize_weight, "
        "so re-quantization from this checkpoint is not supported. Please open an issue.");
  CHECK(kind_of(p33, "model.layers.0.mlp.experts").kind == composition::requantized);
  // Kept without an online target; unquantized where neither quantizes.
  const auto kept = composed(fp8, m, R"({"linear": "mxfp8", "ignore": ["re:.*qkv_proj", "re:.*layers\\.0\\.self_attn\\.o_proj"]})",
                             vllm_release::v0_34);
  CHECK(kind_of(kept, "model.layers.0.self_attn.qkv_proj").kind == composition::kept);
  CHECK(kind_of(kept, "model.layers.0.mlp.experts").kind == composition::kept);
  CHECK(kind_of(kept, "model.layers.1.self_attn.o_proj").kind == composition::online);
  CHECK(kind_of(kept, "model.layers.0.mlp.gate").kind == composition::unquantized);
  CHECK(kind_of(kept, "lm_head").kind == composition::unquantized);
  CHECK_FALSE(kept.first_error());

  // NVFP4 experts (compressed-tensors) decode from 0.33: requantized with no error; 0.34 refuses a
  // Hadamard target on a quantized layer.
  const auto ct = read(R"({"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*mlp.gate$"],
      "config_groups": {"group_0": {"targets": ["re:.*mlp.experts.*"], "format": "nvfp4-pack-quantized",
        "weights": {"type": "float", "num_bits": 4, "strategy": "tensor_group", "group_size": 16}}}})");
  const auto requant = composed(ct, m, R"({"moe": "fp8_per_block", "linear": "fp8_per_tensor"})", vllm_release::v0_34);
  CHECK_FALSE(requant.first_error());
  CHECK(kind_of(requant, "model.layers.1.mlp.experts").kind == composition::requantized);
  CHECK(kind_of(requant, "model.layers.1.self_attn.qkv_proj").kind == composition::online);
  CHECK(requant.summary[2] == "requantized (decoded, then the online method): 2");
  const auto ct_linear = read(R"({"quant_method": "compressed-tensors",
      "config_groups": {"group_0": {"targets": ["Linear"], "format": "mxfp4-pack-quantized",
        "weights": {"type": "float", "num_bits": 4, "strategy": "group", "group_size": 32, "scale_dtype": "torch.uint8"}}}})");
  const auto rotated = composed(ct_linear, m, R"({"linear": {"weight": "mxfp4", "hadamard_size": 32}})", vllm_release::v0_34);
  CHECK(*rotated.first_error() ==
        "model.layers.0.self_attn.qkv_proj: online hadamard_size on an already quantized layer (requantization) is not supported yet.");
}

TEST_CASE("plan --model-dir derives the layers of a quantized directory and prints the composition", "[checkpoint][source][cli]") {
  const qpolicy::test::temp_dir tmp("plan-model-dir");
  const auto fp8 = quantized_dir(tmp.path(), "fp8", R"({"quant_method": "fp8", "activation_scheme": "dynamic",
      "weight_block_size": [128, 128], "ignored_layers": ["lm_head", "model.layers.0.mlp.gate", "model.layers.1.mlp.gate"]})",
                                 moe_specs(stored_as::fp8_blocks));
  auto r = run({"plan", "--model-dir", fp8.string(), "-c", R"({"linear": "fp8_per_tensor"})", "--format", "json"});
  INFO(r.err);
  REQUIRE(r.status == 2);  // Fp8LinearMethod cannot decode its weights for requantization
  const auto doc = json::parse(r.out).as_object();
  const auto& layers = doc.at("layers").as_array();
  REQUIRE(layers.size() == 10);
  CHECK(layers[1].at("name") == "model.layers.0.self_attn.qkv_proj");  // the model's order, not the tensors'
  CHECK(layers[1].at("checkpoint").at("scheme") == "fp8, 128x128 blocks");
  CHECK(layers[1].at("error_stage") == "load");
  CHECK(layers[4].at("name") == "model.layers.0.mlp.experts");
  CHECK(layers[4].at("composition") == "kept");
  CHECK(doc.at("checkpoint").at("method") == "fp8");
  CHECK_THAT(r.err, Catch::Contains("error: The quantization method <class 'vllm.model_executor.layers.quantization.fp8.Fp8LinearMethod'>"));

  // No online config: the checkpoint's method everywhere it quantizes.
  r = run({"plan", "--model-dir", fp8.string()});
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("kept (the checkpoint's fp8): 6") && Catch::Contains("unquantized: 4"));

  // compressed-tensors packed experts (weight_packed) are found as layers; requantized to FP8 blocks in 0.34.
  const auto ct = quantized_dir(tmp.path(), "ct", R"({"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*mlp.gate$"],
      "config_groups": {"group_0": {"targets": ["re:.*mlp.experts.*"], "format": "nvfp4-pack-quantized",
        "weights": {"type": "float", "num_bits": 4, "strategy": "tensor_group", "group_size": 16}}}})",
                                moe_specs(stored_as::nvfp4_experts));
  r = run({"plan", "--model-dir", ct.string(), "-c", R"({"moe": "fp8_per_block"})"});
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("requantized (compressed-tensors group_0: nvfp4-pack-quantized, float4 weights by tensor_group of 16 "
                                    "-> fp8_per_block"));
  r = run({"plan", "--model-dir", ct.string(), "-c", R"({"moe": "fp8_per_block"})", "--vllm", "0.32"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("error: Requantizing checkpoint-quantized MoE layers is not supported."));

  // The quantization argument must name the checkpoint's method (vLLM's text); an unknown method is refused.
  r = run({"plan", "--model-dir", fp8.string(), "-q", "fp8_per_block"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("Quantization method specified in the model config (fp8) does not match the quantization method "
                                    "specified in the `quantization` argument (fp8_per_block)."));
  CHECK(run({"plan", "--model-dir", fp8.string(), "-q", "fp8", "-c", R"({"moe": "mxfp4"})", "--vllm", "0.30"}).status == 2);
  const auto gptq = quantized_dir(tmp.path(), "gptq", R"({"quant_method": "gptq", "bits": 4})", moe_specs(stored_as::fp8_blocks));
  r = run({"plan", "--model-dir", gptq.string()});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("quant_method 'gptq', which this build does not read"));

  // gpt-oss: fused expert blocks [E, 2I, K/32, 16] are the experts' layers; MXFP4 keeps them, the attention goes FP8 online.
  std::vector<st::tensor_spec> oss{{"model.embed_tokens.weight", st::dtype::BF16, {8, 64}}, {"lm_head.weight", st::dtype::BF16, {8, 64}}};
  for (int l = 0; l < 2; ++l) {
    const auto p = "model.layers." + std::to_string(l) + ".";
    for (const char* t : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight"})
      oss.push_back({p + t, st::dtype::BF16, {64, 64}});
    oss.push_back({p + "mlp.router.weight", st::dtype::BF16, {4, 64}});
    oss.push_back({p + "mlp.experts.gate_up_proj_blocks", st::dtype::U8, {4, 8, 2, 16}});
    oss.push_back({p + "mlp.experts.gate_up_proj_scales", st::dtype::U8, {4, 8, 2}});
    oss.push_back({p + "mlp.experts.down_proj_blocks", st::dtype::U8, {4, 64, 1, 16}});
    oss.push_back({p + "mlp.experts.down_proj_scales", st::dtype::U8, {4, 64, 1}});
  }
  const auto oss_dir = quantized_dir(tmp.path(), "gpt-oss", R"({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]})",
                                     oss, "gpt_oss");
  r = run({"plan", "--model-dir", oss_dir.string(), "-q", "anything", "-c", R"({"linear": "fp8_per_block"})", "--format", "json"});
  INFO(r.err);
  REQUIRE(r.status == 0);  // gpt-oss's MXFP4 claims the checkpoint whatever -q says
  const auto oss_plan = json::parse(r.out).as_object();
  std::size_t kept = 0, online = 0;
  for (const auto& l : oss_plan.at("layers").as_array()) {
    kept += l.at("composition") == "kept";
    online += l.at("composition") == "online";
    if (l.at("name") == "model.layers.1.mlp.experts") CHECK(l.at("checkpoint").at("method") == "gpt_oss_mxfp4");
  }
  CHECK(kept == 2);
  CHECK(online == 4);  // qkv_proj and o_proj of each block (the router is built without a quantization config)
}

TEST_CASE("plan --model-dir on the shared real model lists as tiny quantized checkpoints", "[checkpoint][source][cli][models]") {
  const char* models = std::getenv("QPOLICY_MODELS");
  REQUIRE(models);
  const qpolicy::test::temp_dir tmp("plan-model-dir-models");
  struct model_case {
    const char* file;
    const char* checkpoint;  // quantization_config
    const char* config;      // the online config
    std::size_t kept, requantized, online;
  };
  const auto c = GENERATE(values<model_case>({
      // DeepSeek-V3 as published: FP8 128x128 blocks on every linear layer and expert (484 layers less the embeddings, the
      // LM head and 58 routers, which vLLM builds without a quantization config).
      {"deepseek-v3.json", R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]})", "null", 424, 0, 0},
      // gpt-oss-like: MXFP4 experts kept, attention FP8 online (Qwen3-30B-A3B's list).
      {"qwen3-30b-a3b.json", R"({"quant_method": "mxfp4"})", R"({"linear": "fp8_per_block"})", 48, 0, 96},
      // llm-compressor's FP8_DYNAMIC with lm_head ignored; the LM head stays unquantized, the rest kept.
      {"llama-3.1-8b-instruct.json", R"({"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {"group_0":
         {"targets": ["Linear"], "format": "float-quantized", "weights": {"type": "float", "num_bits": 8, "strategy": "channel"},
          "input_activations": {"type": "float", "num_bits": 8, "strategy": "token", "dynamic": true}}}})", "null", 128, 0, 0},
      // ModelOpt NVFP4 Mixtral with the attention excluded: experts requantized to FP8 blocks (ModelOptNvFp4FusedMoE decodes).
      {"mixtral-8x7b.json", R"({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "ignore": ["lm_head", "*self_attn*", "*gate"]})",
       R"({"moe": "fp8_per_block", "linear": "fp8_per_tensor"})", 0, 32, 64},
  }));
  INFO(c.file);
  // The tiny checkpoint: every module the method quantizes stored in its format at 1-row shapes.
  const auto model = qpolicy::parse_model(qpolicy::test::slurp(fs::path(models) / c.file));
  auto source = read(c.checkpoint);
  const bool mixtral = std::string_view(c.file).starts_with("mixtral");
  if (mixtral) source.expert_projections = {"w1", "w3", "w2"};
  std::vector<st::tensor_spec> specs{{"model.embed_tokens.weight", st::dtype::BF16, {1, 1}}};
  for (const auto& l : model.layers) {
    if (!source.decide(model, l).quantized()) continue;
    if (source.method == src::checkpoint_method::mxfp4) {
      const auto e = l.num_experts.value_or(1);
      specs.push_back({l.name + ".gate_up_proj_blocks", st::dtype::U8, {e, 2, 1, 16}});
      specs.push_back({l.name + ".gate_up_proj_scales", st::dtype::U8, {e, 2, 1}});
      specs.push_back({l.name + ".down_proj_blocks", st::dtype::U8, {e, 1, 1, 16}});
      specs.push_back({l.name + ".down_proj_scales", st::dtype::U8, {e, 1, 1}});
      continue;
    }
    std::vector<std::string> modules;
    if (l.kind == qpolicy::layer_kind::moe) {
      for (std::int64_t e = 0; e < *l.num_experts; ++e)
        for (const auto& p : source.expert_projections) modules.push_back(l.name + "." + std::to_string(e) + "." + p);
    } else if (const auto* f = model.fused_entry(l.name)) {
      for (const auto& shard : f->shards) modules.push_back(qpolicy::text::replace_all(l.name, f->fused, shard));
    } else {
      modules.push_back(l.name);
    }
    for (const auto& m : modules) {
      if (source.method == src::checkpoint_method::fp8) {
        specs.push_back({m + ".weight", st::dtype::F8_E4M3, {1, 1}});
        specs.push_back({m + ".weight_scale_inv", st::dtype::F32, {1, 1}});
      } else if (source.method == src::checkpoint_method::compressed_tensors) {
        specs.push_back({m + ".weight", st::dtype::F8_E4M3, {1, 1}});
        specs.push_back({m + ".weight_scale", st::dtype::BF16, {1, 1}});  // llm-compressor's scales are bf16
      } else {
        specs.push_back({m + ".weight", st::dtype::U8, {1, 8}});
        specs.push_back({m + ".weight_scale", st::dtype::F8_E4M3, {1, 1}});
        specs.push_back({m + ".weight_scale_2", st::dtype::F32, {}});
      }
    }
  }
  const auto dir = quantized_dir(tmp.path(), c.file, c.checkpoint, specs, "x");
  std::vector<std::string> args{"plan", "--model-dir", dir.string(), "--model", (fs::path(models) / c.file).string(), "--format", "json"};
  if (std::string_view(c.config) != "null") args.insert(args.end(), {"-c", c.config});
  const auto r = run(args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::size_t kept = 0, requantized = 0, online = 0;
  const auto doc = json::parse(r.out);
  for (const auto& l : doc.at("layers").as_array()) {
    kept += l.at("composition") == "kept";
    requantized += l.at("composition") == "requantized";
    online += l.at("composition") == "online";
  }
  CHECK(kept == c.kept);
  CHECK(requantized == c.requantized);
  CHECK(online == c.online);
}

TEST_CASE("plan --model-dir refuses a checkpoint whose tensors are not what its format says, naming the tensor", "[checkpoint][source][cli]") {
  const qpolicy::test::temp_dir tmp("plan-model-dir-stored");
  const char* nvfp4 = R"({"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*mlp.gate$"],
      "config_groups": {"group_0": {"targets": ["re:.*mlp.experts.*"], "format": "nvfp4-pack-quantized",
        "weights": {"type": "float", "num_bits": 4, "strategy": "tensor_group", "group_size": 16}}}})";
  // The format says NVFP4 but the checkpoint holds FP8 blocks (M.weight), no packed codes or global scales.
  const auto unpacked = quantized_dir(tmp.path(), "unpacked", nvfp4, moe_specs(stored_as::fp8_blocks));
  auto r = run({"plan", "--model-dir", unpacked.string()});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("the checkpoint's compressed-tensors group_0: nvfp4-pack-quantized, float4 weights by tensor_group of 16 "
                                    "stores model.layers.0.mlp.experts.0.gate_proj as weight_packed U8 [N, K/2], weight_scale F8_E4M3 [N, K/16], "
                                    "weight_global_scale F32 [1]; tensor 'model.layers.0.mlp.experts.0.gate_proj.weight_packed' is missing"));
  // A scale of another shape than the codes give (weight_packed [128, 128] is K = 256: 16 scales a row).
  auto specs = moe_specs(stored_as::nvfp4_experts);
  for (auto& sp : specs)
    if (sp.name == "model.layers.1.mlp.experts.2.down_proj.weight_scale") sp.shape = {256, 4};
  const auto wrong = quantized_dir(tmp.path(), "wrong", nvfp4, specs);
  r = run({"plan", "--model-dir", wrong.string()});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("tensor 'model.layers.1.mlp.experts.2.down_proj.weight_scale' is F8_E4M3 [256, 4], expected [256, 8] for "
                                    "codes of [N, K] = [256, 128]"));
  // gpt-oss's blocks without their scales.
  const auto oss = tmp.path() / "oss";
  fs::create_directories(oss);
  {
    st::file_writer w((oss / "model.safetensors").string(),
                      {{"model.layers.0.self_attn.o_proj.weight", st::dtype::BF16, {2, 2}},
                       {"model.layers.0.mlp.experts.gate_up_proj_blocks", st::dtype::U8, {2, 4, 1, 16}},
                       {"model.layers.0.mlp.experts.down_proj_blocks", st::dtype::U8, {2, 2, 1, 16}},
                       {"model.layers.0.mlp.experts.down_proj_scales", st::dtype::U8, {2, 2, 1}}},
                      {});
    w.write(std::vector<std::byte>(8));
    w.write(std::vector<std::byte>(2 * 4 * 16));
    w.write(std::vector<std::byte>(2 * 2 * 16));
    w.write(std::vector<std::byte>(4));
    w.finish();
  }
  std::ofstream(oss / "config.json") << R"({"model_type": "gpt_oss", "quantization_config": {"quant_method": "mxfp4"}})" << "\n";
  r = run({"plan", "--model-dir", oss.string()});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("stores model.layers.0.mlp.experts as gate_up_proj_blocks U8 [E, N, K/32, 16] and gate_up_proj_scales U8 "
                                    "[E, N, K/32]; tensor 'model.layers.0.mlp.experts.gate_up_proj_scales' is missing"));
}
