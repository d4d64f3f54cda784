// The checkpoint methods whose config names each layer's scheme: Quark (quark.py: exclude, layer_quant_config,
// the global config; the scheme from the weight and input specs) and ModelOpt MIXED_PRECISION (modelopt.py:
// exclude_modules, then quantized_layers by name, fused shards and prefix), read, validated and decided
// layer by layer with vLLM's texts.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include "../support/source_models.hpp"
#include "qpolicy/config/config.hpp"
#include "qpolicy/source/checkpoint_source.hpp"

namespace {

namespace json = boost::json;
namespace src = qpolicy::source;
using qpolicy::test::layer;
using src::method_class;
using src::stored_layout;

src::checkpoint_source read(std::string_view qc) { return src::read_checkpoint_source(json::parse(qc), "qwen3_moe"); }

/// A Quark config around `layers` (layer_quant_config) and `global` (global_quant_config), with `exclude`.
std::string quark(std::string_view layers, std::string_view global = R"({"weight": null})", std::string_view exclude = "[]",
                  std::string_view kv_cache_group = "[]") {
  return R"({"quant_method": "quark", "export": {"kv_cache_group": )" + std::string(kv_cache_group) +
         R"(, "pack_method": "reorder"}, "exclude": )" + std::string(exclude) + R"(, "layer_quant_config": )" + std::string(layers) +
         R"(, "layer_type_quant_config": {}, "global_quant_config": )" + std::string(global) + "}";
}

constexpr const char* fp8_channel = R"({"weight": {"dtype": "fp8_e4m3", "qscheme": "per_channel", "is_dynamic": false, "symmetric": true},
  "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_channel", "is_dynamic": true, "symmetric": true}})";
constexpr const char* fp8_tensor = R"({"weight": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": false},
  "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": false}})";
constexpr const char* fp8_blocks = R"({"weight": {"dtype": "fp8_e4m3", "qscheme": "per_block", "block_size": [128, 128], "symmetric": true},
  "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_group", "group_size": 128, "is_dynamic": true, "symmetric": true}})";
constexpr const char* mxfp4 = R"({"weight": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}, "input_tensors": null})";

std::string error_of(const src::checkpoint_source& s, const qpolicy::model_desc& m, std::string_view name) {
  const auto d = s.decide(m, layer(m, name));
  return d.error.value_or("(no error)");
}

}  // namespace

TEST_CASE("Quark: exclude, then layer_quant_config by containment or fnmatch, then the global config", "[checkpoint][source][quark]") {
  const auto m = qpolicy::test::moe_model();
  const auto s = read(quark(std::string(R"({"model.layers.0.self_attn.q_proj": )") + fp8_channel + R"(, "model.layers.0.self_attn.k_proj": )" +
                                fp8_channel + R"(, "model.layers.0.self_attn.v_proj": )" + fp8_channel + R"(, "*o_proj": )" + fp8_tensor +
                                R"(, "model.layers.0.mlp.experts": )" + mxfp4 + "}",
                            fp8_blocks, R"(["model.layers.1.mlp.experts.0.down_proj", "lm_head", "model.layers.1.self_attn.o_proj"])"));
  CHECK(s.method == src::checkpoint_method::quark);
  const auto qkv0 = s.decide(m, layer(m, "model.layers.0.self_attn.qkv_proj"));
  CHECK(qkv0.cls == method_class::quark_linear);
  CHECK(qkv0.layout == stored_layout::fp8_channel);
  CHECK(qkv0.rule == "layer_quant_config 'model.layers.0.self_attn.q_proj'");
  CHECK(qkv0.entry == "model.layers.0.self_attn.q_proj");
  CHECK(s.decide(m, layer(m, "model.layers.0.self_attn.o_proj")).layout == stored_layout::fp8_tensor);
  CHECK(s.decide(m, layer(m, "model.layers.1.self_attn.o_proj")).rule == "exclude 'model.layers.1.self_attn.o_proj'");
  const auto qkv1 = s.decide(m, layer(m, "model.layers.1.self_attn.qkv_proj"));
  CHECK(qkv1.rule == "global_quant_config");
  CHECK(qkv1.layout == stored_layout::fp8_blocks);
  const auto e0 = s.decide(m, layer(m, "model.layers.0.mlp.experts"));
  CHECK(e0.cls == method_class::quark_ocp_mx_moe);
  CHECK(e0.layout == stored_layout::mxfp4);
  // An exclude entry naming one expert's module excludes the whole MoE layer.
  CHECK(s.decide(m, layer(m, "model.layers.1.mlp.experts")).rule == "exclude 'model.layers.1.mlp.experts.0.down_proj'");
  CHECK(s.decide(m, layer(m, "model.layers.1.mlp.experts")).cls == method_class::unquantized_moe);
  CHECK(!s.decide(m, layer(m, "lm_head")).quantized());
  CHECK(!s.decide(m, layer(m, "model.embed_tokens")).quantized());
  CHECK(s.describe() == "quant_method 'quark' (vLLM's quark: linear layers and experts by their layer_quant_config or global_quant_config, "
                        "less exclude), 5 layer_quant_config entries, 3 exclude entries");
}

TEST_CASE("Quark: the schemes vLLM refuses, with its texts, and those this build does not read", "[checkpoint][source][quark]") {
  const auto m = qpolicy::test::moe_model();
  SECTION("shards that disagree") {
    const auto s = read(quark(std::string(R"({"model.layers.1.self_attn.q_proj": )") + fp8_channel + "}", fp8_tensor));
    CHECK(error_of(s, m, "model.layers.1.self_attn.qkv_proj") ==
          "Found a different quantization configuration for ['q_proj', 'k_proj', 'v_proj'] in model.layers.1.self_attn.qkv_proj. vLLM requires all "
          "to use the same scheme.");
  }
  SECTION("a global config without a weight spec, for a layer named nowhere") {
    const auto s = read(quark("{}"));
    CHECK(error_of(s, m, "model.layers.0.self_attn.o_proj") == "No quark compatible scheme was found. Weight config: None, Input config: None");
    CHECK(error_of(s, m, "model.layers.0.mlp.experts") == "Unsupported FusedMoe scheme");
  }
  SECTION("the weight spec printed as Python prints the dict") {
    const auto s = read(quark("{}", R"({"weight": {"dtype": "fp8_e4m3", "qscheme": "per_group", "group_size": 64, "symmetric": true,
                                        "scale": 1.0}})"));
    CHECK(error_of(s, m, "model.layers.0.self_attn.o_proj") ==
          "No quark compatible scheme was found. Weight config: {'dtype': 'fp8_e4m3', 'qscheme': 'per_group', 'group_size': 64, "
          "'symmetric': True, 'scale': 1.0}, Input config: None");
  }
  SECTION("quantized outputs or biases, per-block weights without their block, an activation dtype vLLM has no key for") {
    auto global_error = [&](std::string_view global) { return error_of(read(quark("{}", global)), m, "model.layers.0.self_attn.o_proj"); };
    CHECK(global_error(R"({"weight": {"dtype": "fp8_e4m3"}, "output_tensors": {"dtype": "fp8_e4m3"}})") ==
          "Currently, Quark models with output_tensors and bias quantized are not supported");
    CHECK(global_error(R"({"weight": {"dtype": "fp8_e4m3", "qscheme": "per_block"}})") ==
          "Quark W8A8 FP8 per-block weight quantization requires `block_size` in the weight quantization config.");
    CHECK_THAT(global_error(R"({"weight": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"},
                               "input_tensors": {"dtype": "int8", "is_dynamic": true}})"),
               Catch::StartsWith("Unsupported input_dtype=int8 in Quark's vLLM integration. Supported activation dtypes are dict_keys(['mxfp4',"));
    CHECK_THAT(global_error(R"({"weight": {"dtype": "int8", "qscheme": "per_channel"}, "input_tensors": {"dtype": "int8"}})"),
               Catch::Contains("(INT weights), which this build does not read"));
    CHECK_THAT(global_error(R"({"weight": [{"dtype": "fp4"}, {"dtype": "fp8_e4m3"}]})"),
               Catch::Contains("has a multi-entry weight or input spec (Quark's NVFP4 or W4A8), which this build does not read"));
  }
  SECTION("MXFP8 weights: a linear layer vLLM 0.34 decodes; experts this build does not read") {
    const auto s = read(quark("{}", R"({"weight": {"dtype": "fp8_e4m3", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}})"));
    CHECK(s.decide(m, layer(m, "model.layers.0.self_attn.o_proj")).layout == stored_layout::mxfp8);
    CHECK_THAT(error_of(s, m, "model.layers.0.mlp.experts"), Catch::Contains("MXFP8 experts"));
  }
}

TEST_CASE("Quark's config is validated where vLLM reads it", "[checkpoint][source][quark]") {
  auto refused = [](const std::string& qc, const std::string& message) {
    CHECK_THROWS_WITH(read(qc), Catch::Contains(message));
  };
  refused(R"({"quant_method": "quark", "exclude": []})", "The export key should be included in the configurations of Quark quantized model");
  refused(R"({"quant_method": "quark", "export": [], "exclude": []})", "quantization_config.export is []; expected an object");
  refused(R"({"quant_method": "quark", "export": {"kv_cache_group": []}, "layer_type_quant_config": {}, "global_quant_config": {}})",
          "quantization_config.exclude is null; expected a list of module names ([] for none)");
  refused(R"({"quant_method": "quark", "export": {}, "exclude": []})", "quantization_config.export.kv_cache_group is null; expected a list");
  refused(quark("[]"), "quantization_config.layer_quant_config is []; expected an object of layer pattern -> config");
  refused(R"({"quant_method": "quark", "export": {"kv_cache_group": []}, "exclude": [], "layer_type_quant_config": {}})",
          "quantization_config.global_quant_config is null; expected an object");
  refused(quark("{}", R"({"weight": null})", R"(["lm_head", 3])"), "quantization_config.exclude holds 3; expected module names (strings)");
  refused(quark(std::string(R"({"*o_proj": )") + fp8_tensor + "}", R"({"weight": null})", "[]", R"(["*k_proj"])"),
          "The Quark quantized model has the kv_cache_group parameter setting, but no kv_cache quantization settings were found");
  refused(quark("{}", R"({"weight": {"dtype": "fp8_e4m3", "qscheme": "per_block", "block_size": [128, 0]}})"),
          "quantization_config.global_quant_config.weight.block_size is [128,0]; expected two positive integers [rows, cols]");
  refused(quark(R"({"*": {"input_tensors": [{"group_size": -32}]}})"),
          "quantization_config.layer_quant_config['*'].input_tensors[0].group_size is -32; expected a positive group size, or null");
  // The KV-cache layers' output specs are vLLM's to clear: then their configs are read as any other.
  const auto kv = read(quark(R"({"*k_proj": {"weight": null, "output_tensors": {"dtype": "fp8_e4m3"}},
                                 "*v_proj": {"weight": null, "output_tensors": {"dtype": "fp8_e4m3"}}})",
                             R"({"weight": null})", "[]", R"(["*k_proj", "*v_proj"])"));
  CHECK(kv.quark_layers.size() == 2);
  refused(quark(R"({"*k_proj": {"output_tensors": {"dtype": "fp8_e4m3"}}, "*v_proj": {"output_tensors": {"dtype": "int8"}}})", R"({"weight": null})",
                "[]", R"(["*k_proj", "*v_proj"])"),
          "The quantization method used for kv_cache should be the same");
}

TEST_CASE("ModelOpt MIXED_PRECISION: exclude_modules, then each layer's algo from quantized_layers", "[checkpoint][source][modelopt]") {
  const auto m = qpolicy::test::moe_model();
  const auto s = read(R"({"quant_method": "modelopt", "quantization": {"quant_algo": "MIXED_PRECISION", "exclude_modules": ["model.layers.1.self_attn.o_proj"],
    "quantized_layers": {
      "model.layers.0.self_attn.q_proj": {"quant_algo": "FP8_PB_WO"}, "model.layers.0.self_attn.k_proj": {"quant_algo": "FP8_PB_WO"},
      "model.layers.0.self_attn.v_proj": {"quant_algo": "FP8_PB_WO"}, "model.layers.0.self_attn.o_proj": {"quant_algo": "fp8"},
      "model.layers.0.mlp.experts.0.gate_proj": {"quant_algo": "NVFP4", "group_size": 32},
      "model.layers.1.self_attn.q_proj": {"quant_algo": "FP8"}, "model.layers.1.self_attn.k_proj": {"quant_algo": "NVFP4"},
      "model.layers.1.mlp.experts.0.down_proj": {"quant_algo": "MXFP8"}, "lm_head": {"quant_algo": "W4A16_NVFP4"}}}})");
  CHECK(s.method == src::checkpoint_method::modelopt_mixed);
  CHECK(s.group_size == 32);  // the first NVFP4 entry's
  const auto qkv0 = s.decide(m, layer(m, "model.layers.0.self_attn.qkv_proj"));
  CHECK(qkv0.cls == method_class::modelopt_linear);
  CHECK(qkv0.layout == stored_layout::fp8_blocks_4d);
  CHECK(qkv0.rule == "quantized_layers 'model.layers.0.self_attn.q_proj' (quant_algo 'FP8_PB_WO')");
  CHECK(s.decide(m, layer(m, "model.layers.0.self_attn.o_proj")).layout == stored_layout::fp8_tensor);  // upper-cased
  const auto e0 = s.decide(m, layer(m, "model.layers.0.mlp.experts"));
  CHECK(e0.cls == method_class::modelopt_nvfp4_moe);
  CHECK(e0.entry == "model.layers.0.mlp.experts.0.gate_proj");
  CHECK(error_of(s, m, "model.layers.1.self_attn.qkv_proj") ==
        "Mixed quant_algo within fused layer model.layers.1.self_attn.qkv_proj: {'FP8', 'NVFP4'}. All shards must use the same quantization.");
  CHECK(s.decide(m, layer(m, "model.layers.1.self_attn.o_proj")).rule == "exclude_modules 'model.layers.1.self_attn.o_proj'");
  CHECK(s.decide(m, layer(m, "model.layers.1.mlp.experts")).cls == method_class::modelopt_mxfp8_moe);
  const auto head = s.decide(m, layer(m, "lm_head"));
  CHECK(head.cls == method_class::modelopt_linear);
  CHECK(head.layout == stored_layout::nvfp4);
  CHECK(!s.decide(m, layer(m, "model.embed_tokens")).quantized());
  // Block-FP8 names no linear method: vLLM leaves the layer unquantized.
  const auto blocks = read(R"({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "group_size": 16,
                               "quantized_layers": {"model.layers.0.self_attn.o_proj": {"quant_algo": "FP8_BLOCK_SCALES"}}})");
  CHECK(blocks.decide(m, layer(m, "model.layers.0.self_attn.o_proj")).cls == method_class::unquantized_linear);
  CHECK(blocks.group_size == 16);
}

TEST_CASE("ModelOpt MIXED_PRECISION's quantized_layers are validated where vLLM reads them", "[checkpoint][source][modelopt]") {
  auto mixed = [](std::string_view layers) {
    return R"({"quant_method": "modelopt", "quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": )" + std::string(layers) + "}}";
  };
  auto refused = [](const std::string& qc, const std::string& message) { CHECK_THROWS_WITH(read(qc), Catch::Contains(message)); };
  refused(R"({"quant_method": "modelopt", "quantization": {"quant_algo": "MIXED_PRECISION"}})",
          "MIXED_PRECISION quant_algo requires a non-empty 'quantized_layers' mapping in the quantization config.");
  refused(mixed("{}"), "requires a non-empty 'quantized_layers' mapping");
  refused(mixed("[]"), "quantization_config.quantization.quantized_layers is []; expected an object");
  refused(mixed(R"({"a": "NVFP4"})"), "quantization_config.quantization.quantized_layers['a'] is 'NVFP4'; expected an object with the module's quant_algo");
  refused(mixed(R"({"a": {"group_size": 16}})"), "quantized_layers['a'].quant_algo is null; expected a ModelOpt algo name");
  refused(mixed(R"({"a": {"quant_algo": 4}})"), "quantized_layers['a'].quant_algo is 4; expected a ModelOpt algo name");
  refused(mixed(R"({"a": {"quant_algo": "q8_0"}})"), "quantized_layers['a'].quant_algo is 'q8_0', a ggml block codec this build does not read");
  refused(mixed(R"({"a": {"quant_algo": "NVFP4", "weight_scale_encoding": "csf"}})"), "a scale encoding this build does not read");
  refused(mixed(R"({"a": {"quant_algo": "NVFP4", "group_size": 0}})"), "quantized_layers['a'].group_size is 0; expected a positive number");
  refused(mixed(R"({"a": {"quant_algo": "FP8_PB_WO", "group_size": 128}, "b": {"quant_algo": "FP8_BLOCK_SCALES", "group_size": 64}})"),
          "MIXED_PRECISION currently requires all block-FP8 MoE layers to use one group_size, got [64, 128].");
  refused(mixed(R"({"a": {"quant_algo": "FP8_PB_WO", "group_size": "x128"}})"), "quantized_layers['a'].group_size is 'x128'; expected a positive block size");
  CHECK_NOTHROW(read(mixed(R"({"a": {"quant_algo": "FP8_PB_WO", "group_size": " 128 "}, "b": {"quant_algo": "FP8_PB_WO"}})")));  // int() reads it
}
