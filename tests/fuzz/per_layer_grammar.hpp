#pragma once
// The grammar of the checkpoint configs that name each layer's scheme (checkpoint_grammar.hpp draws them):
// Quark's (an attention spec by "*self_attn*", an experts spec by "*experts*", the global config) and
// ModelOpt MIXED_PRECISION's (quantized_layers naming each attention and expert module with its algo).
// Choice 0 is the form quantize writes; the others damage a field, a spec or an entry.
#include "grammar_basics.hpp"

namespace qpolicy::fuzz {

/// One Quark QuantizationSpec with each field possibly damaged.
inline json::value quark_spec(choices& c, std::string_view dtype, std::string_view qscheme, json::value group_size, bool dynamic,
                              json::value block_size = nullptr, std::string_view scale_format = "") {
  if (c.pick(24) == 23) return c.pick(2) ? json::value(json::array{}) : json::value("fp8");
  json::object s;
  field(c, s, "dtype", json::string(dtype), {"fp8_e5m2", "int8", "fp6_e2m3", 4});
  field(c, s, "qscheme", json::string(qscheme), {"per_tensor", "per_channel", "per_group", "per_block", "bogus"});
  if (group_size.is_null()) field(c, s, "group_size", nullptr, {int_field(c, 32)});
  else s["group_size"] = int_field(c, group_size.as_int64());
  field(c, s, "is_dynamic", dynamic, {!dynamic, "yes"});
  field(c, s, "symmetric", true, {false});
  if (!block_size.is_null()) {
    switch (c.pick(6)) {
      case 1: s["block_size"] = json::array{int_field(c, 128), int_field(c, 128)}; break;
      case 2: s["block_size"] = json::array{128}; break;
      case 3: s["block_size"] = "128x128"; break;
      default: s["block_size"] = block_size; break;
    }
  }
  if (!scale_format.empty()) field(c, s, "scale_format", json::string(scale_format), {"e4m3", 8});
  field(c, s, "ch_axis", dynamic ? -1 : 0, {json::array{0}});
  return s;
}

/// The attention specs Quark's FP8 and OCP MX linear layers are written with, by index.
inline constexpr unsigned quark_attention_kinds = 5;  // fp8 per channel, per tensor, 128x128 blocks, mxfp8, mxfp4
inline json::object quark_layer(choices& c, json::value weight, json::value input) {
  json::object o{{"bias", nullptr}, {"output_tensors", nullptr}, {"target_device", nullptr}};
  o["weight"] = std::move(weight);
  o["input_tensors"] = std::move(input);
  switch (c.pick(16)) {
    case 1: o["output_tensors"] = json::object{{"dtype", "fp8_e4m3"}}; break;
    case 2: o["bias"] = true; break;
    case 3: o["weight"] = json::array{o["weight"], o["weight"]}; break;
    case 4: o["weight"] = json::array{o["weight"]}; break;
    default: break;
  }
  return o;
}

inline json::object quark_config(choices& c, unsigned attention, bool mxfp4_experts) {
  json::value weight, input;
  switch (attention) {
    case 0:
      weight = quark_spec(c, "fp8_e4m3", "per_channel", nullptr, false);
      input = quark_spec(c, "fp8_e4m3", "per_channel", nullptr, true);
      break;
    case 1:
      weight = quark_spec(c, "fp8_e4m3", "per_tensor", nullptr, false);
      input = quark_spec(c, "fp8_e4m3", "per_tensor", nullptr, c.pick(2) == 0);
      break;
    case 2:
      weight = quark_spec(c, "fp8_e4m3", "per_block", nullptr, false, json::array{128, 128});
      input = quark_spec(c, "fp8_e4m3", "per_group", 128, true);
      break;
    case 3:
      weight = quark_spec(c, "fp8_e4m3", "per_group", 32, false, nullptr, "e8m0");
      input = nullptr;
      break;
    default:
      weight = quark_spec(c, "fp4", "per_group", 32, false, nullptr, "e8m0");
      input = c.pick(4) == 3 ? quark_spec(c, "fp4", "per_group", 32, true, nullptr, "e8m0") : json::value(nullptr);
      break;
  }
  json::object layers;
  layers["*self_attn*"] = quark_layer(c, std::move(weight), std::move(input));
  // The experts: gpt-oss's MXFP4 (weight-only) or FP8 per tensor.
  if (mxfp4_experts)
    layers["*experts*"] = quark_layer(c, quark_spec(c, "fp4", "per_group", 32, false, nullptr, "e8m0"), nullptr);
  else
    layers["*experts*"] = quark_layer(c, quark_spec(c, "fp8_e4m3", "per_tensor", nullptr, false), quark_spec(c, "fp8_e4m3", "per_tensor", nullptr, true));
  if (c.pick(8) == 7) layers["model.layers.0.self_attn.q_proj"] = quark_layer(c, quark_spec(c, "fp8_e4m3", "per_tensor", nullptr, false), nullptr);
  if (c.pick(16) == 15) layers["*mlp*"] = 5;
  json::object o{{"quant_method", "quark"}, {"quant_mode", "eager_mode"}, {"algo_config", nullptr}};
  json::object exp{{"pack_method", "reorder"}, {"weight_format", "real_quantized"}};
  field(c, exp, "kv_cache_group", json::array{}, {json::array{"*k_proj", "*v_proj"}, json::array{"*nothing"}, "*k_proj", json::array{5}});
  field(c, o, "export", std::move(exp), {5, json::array{}});
  field(c, o, "exclude", json::array{"lm_head", "model.layers.0.mlp.gate"}, {name_list(c), json::array{"model.layers.0.mlp.experts.0.down_proj"}});
  field(c, o, "layer_quant_config", std::move(layers), {json::array{}, 5});
  field(c, o, "layer_type_quant_config", json::object{}, {5});
  field(c, o, "global_quant_config", quark_layer(c, nullptr, nullptr), {5, quark_layer(c, quark_spec(c, "fp8_e4m3", "per_tensor", nullptr, false), nullptr)});
  return o;
}

/// ModelOpt's algos and the layout each stores a module in.
struct mixed_algo {
  const char* algo;
  layout linear, experts;
};
inline constexpr mixed_algo mixed_algos[] = {
    {"FP8", layout::modelopt_fp8, layout::modelopt_fp8},          {"FP8_PER_CHANNEL_PER_TOKEN", layout::fp8_channel_rows, layout::bf16},
    {"FP8_PB_WO", layout::fp8_blocks_4d, layout::fp8_block},      {"MXFP8", layout::ct_mxfp8, layout::ct_mxfp8},
    {"NVFP4", layout::modelopt_nvfp4, layout::modelopt_nvfp4},    {"W4A16_NVFP4", layout::modelopt_nvfp4, layout::modelopt_nvfp4},
};

/// A quantized_layers entry: the algo, possibly damaged, and a group size where NVFP4 or blocks need one.
inline json::value mixed_entry(choices& c, const mixed_algo& a) {
  if (c.pick(32) == 31) return c.pick(2) ? json::value(a.algo) : json::value(nullptr);
  json::object e;
  field(c, e, "quant_algo", a.algo, {"fp8", "q8_0", "MIXED_PRECISION", 7, "BOGUS"});
  if (std::string_view(a.algo).find("NVFP4") != std::string_view::npos) e["group_size"] = int_field(c, 16);
  else if (std::string_view(a.algo) == "FP8_PB_WO") field(c, e, "group_size", 128, {int_field(c, 128)});
  if (c.pick(32) == 31) e["weight_scale_encoding"] = "csf";
  return e;
}

inline json::object modelopt_mixed_config(choices& c, unsigned linear, unsigned experts) {
  json::object layers;
  for (int l = 0; l < 2; ++l) {
    const auto p = "model.layers." + std::to_string(l) + ".";
    // A shard's algo may differ from its siblings' (vLLM's "Mixed quant_algo within fused layer").
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"})
      layers[p + "self_attn." + proj] = mixed_entry(c, mixed_algos[c.pick(32) == 31 ? c.pick(6) : linear]);
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
      layers[p + "mlp." + proj] = mixed_entry(c, mixed_algos[linear]);
      layers[p + "mlp.experts.0." + proj] = mixed_entry(c, mixed_algos[experts]);
    }
  }
  json::object q{{"quant_algo", "MIXED_PRECISION"}};
  field(c, q, "quantized_layers", std::move(layers), {json::object{}, json::array{}, 5});
  field(c, q, "exclude_modules", json::array{"lm_head", "model.layers.0.mlp.gate", "model.layers.1.mlp.gate"}, {name_list(c)});
  field(c, q, "kv_cache_quant_algo", nullptr, {"FP8", 5});
  if (c.pick(8) == 7) q["group_size"] = int_field(c, 16);
  return {{"quant_method", "modelopt"}, {"quantization", std::move(q)}};
}

/// The layout a Quark config's attention spec (`attention`, as quark_config drew it) gives a module.
inline layout quark_layout(unsigned attention) {
  static constexpr layout layouts[] = {layout::fp8_channel_rows, layout::fp8_tensor, layout::fp8_blocks_grid, layout::ct_mxfp8, layout::mxfp4_weight};
  return layouts[attention % quark_attention_kinds];
}

}  // namespace qpolicy::fuzz
