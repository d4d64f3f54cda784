// Quark's quantization_config (checkpoint_format.hpp): the output format of a gpt-oss checkpoint whose
// MXFP4 experts stay as stored beside online FP8 linear layers. vLLM 0.34 reads gpt-oss's fused
// `*_blocks`/`*_scales` experts beside quantized linear layers only in GptOssModel._load_weights_quark;
// QuarkConfig (quark.py) decides each layer: `exclude` (exact names, fused shards agreeing), then
// `layer_quant_config` (a name without `*` matches by containment, else fnmatch), then the layer type's
// config, then `global_quant_config`; _is_fp8_w8a8 and _is_w_ocp_mx_a_x read the specs written here.
#include <optional>
#include <string>

#include "checkpoint_format.hpp"
#include "qpolicy/config/config.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy::checkpoint_io {

namespace {

namespace json = boost::json;

/// One Quark QuantizationSpec as Quark exports it (keys sorted); `extra` adds the layout's own fields.
json::object quark_spec(std::string_view dtype, std::string_view qscheme, bool dynamic, json::value ch_axis, json::value group_size,
                        json::object extra = {}) {
  json::object s{{"ch_axis", std::move(ch_axis)},
                 {"dtype", dtype},
                 {"group_size", std::move(group_size)},
                 {"is_dynamic", dynamic},
                 {"observer_cls", nullptr},
                 {"qscheme", qscheme},
                 {"round_method", nullptr},
                 {"scale_type", "float"},
                 {"symmetric", true}};
  for (auto& [k, v] : extra) s[k] = std::move(v);
  return s;
}

/// The weight and input_tensors specs of an online FP8 layer: its weight layout with the dynamic
/// activations its method runs with (per tensor, per token, or 1x128 groups beside 128x128 blocks).
json::object fp8_layer_config(method m, std::optional<key_id> activation) {
  json::object weight;
  switch (*schemes::contract_of(m).scales) {
    case fp8::weight_scales::per_tensor: weight = quark_spec("fp8_e4m3", "per_tensor", false, nullptr, nullptr); break;
    case fp8::weight_scales::per_channel: weight = quark_spec("fp8_e4m3", "per_channel", false, 0, nullptr); break;
    case fp8::weight_scales::block_128x128:
      weight = quark_spec("fp8_e4m3", "per_block", false, nullptr, nullptr,
                          {{"block_size", json::array{schemes::block_k, schemes::block_k}}});
      break;
  }
  json::value input = nullptr;
  if (activation) {
    const auto& group = key_of(*activation).scale.group;
    if (group == per_tensor) input = quark_spec("fp8_e4m3", "per_tensor", true, nullptr, nullptr);
    else if (group == per_token) input = quark_spec("fp8_e4m3", "per_channel", true, -1, nullptr);
    else input = quark_spec("fp8_e4m3", "per_group", true, -1, group.col);
  }
  return {{"bias", nullptr}, {"input_tensors", std::move(input)}, {"output_tensors", nullptr}, {"target_device", nullptr}, {"weight", std::move(weight)}};
}

}  // namespace

bool quark_expresses(method m, std::optional<key_id> activation) {
  if (schemes::weight_formula_of(m) || !schemes::contract_of(m).scales) return false;
  if (!activation) return true;
  const auto& key = key_of(*activation);
  if (key.data != dtype::f8e4m3fn || key.scale.is_static) return false;
  const auto& group = key.scale.group;
  return group == per_tensor || group == per_token ||
         (group.row == 1 && group.col == schemes::block_k && schemes::contract_of(m).scales == fp8::weight_scales::block_128x128);
}

json::object quark_mxfp4_experts_config() {
  // gpt-oss's experts: MXFP4 weights (E8M0 scales per 32 along K), bf16 activations (W4A16).
  return {{"bias", nullptr},
          {"input_tensors", nullptr},
          {"output_tensors", nullptr},
          {"target_device", nullptr},
          {"weight", quark_spec("fp4", "per_group", false, -1, 32, {{"scale_format", "e8m0"}})}};
}

json::object quark_quantization_config(const model_desc& model, const plan& online,
                                       const std::vector<std::pair<std::string, json::object>>& kept,
                                       const std::function<bool(std::size_t)>& unquantized) {
  json::object layers;
  for (const auto& [name, config] : kept) layers[name] = config;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& l = online.layers[i];
    if (!l.quantized()) continue;
    const auto config = fp8_layer_config(l.decided, activation_of(l, model.layers[i].kind));
    for (const auto& name : layer_module_names(model, model.layers[i], false)) layers[name] = config;
  }
  json::array exclude;
  for (const auto& name : unquantized_modules_if(model, unquantized, false)) exclude.emplace_back(name);
  // Every quantized module is named above: a linear layer named nowhere fails to load (the global
  // config has no weight spec) instead of being quantized by accident.
  const json::object none{{"bias", nullptr}, {"input_tensors", nullptr}, {"output_tensors", nullptr}, {"target_device", nullptr}, {"weight", nullptr}};
  return {{"algo_config", nullptr},
          {"exclude", std::move(exclude)},
          {"export",
           json::object{{"kv_cache_group", json::array{}},
                        {"min_kv_scale", 0.0},
                        {"pack_method", "reorder"},
                        {"weight_format", "real_quantized"},
                        {"weight_merge_groups", nullptr}}},
          {"global_quant_config", none},
          {"layer_quant_config", std::move(layers)},
          {"layer_type_quant_config", json::object{}},
          {"quant_method", "quark"},
          {"quant_mode", "eager_mode"}};
}

}  // namespace qpolicy::checkpoint_io
