// vLLM's checkpoint methods' layer rules (checkpoint_source.hpp names the vLLM sources each follows);
// checkpoint_config.cpp reads the quantization_config they take.
#include "qpolicy/source/checkpoint_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "qpolicy/config/config.hpp"
#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/match/pattern.hpp"
#include "checkpoint_matching.hpp"

namespace qpolicy::source {

namespace {

using detail::is_layer_skipped;
using detail::matched_group;
using detail::shard_names;
using detail::should_ignore;

constexpr class_row class_table[] = {
    {method_class::unquantized_linear, "vllm.model_executor.layers.linear.UnquantizedLinearMethod"},
    {method_class::unquantized_moe, "vllm.model_executor.layers.fused_moe.unquantized_fused_moe_method.UnquantizedFusedMoEMethod"},
    {method_class::fp8_linear, "vllm.model_executor.layers.quantization.fp8.Fp8LinearMethod"},
    {method_class::fp8_moe, "vllm.model_executor.layers.quantization.fp8.Fp8MoEMethod"},
    {method_class::mxfp4_moe, "vllm.model_executor.layers.quantization.mxfp4.Mxfp4MoEMethod"},
    {method_class::ct_linear, "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors.CompressedTensorsLinearMethod"},
    {method_class::ct_moe_w8a8_fp8,
     "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe.compressed_tensors_moe_w8a8_fp8."
     "CompressedTensorsW8A8Fp8MoEMethod"},
    {method_class::ct_moe_w8a8_mxfp8,
     "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe.compressed_tensors_moe_w8a8_mxfp8."
     "CompressedTensorsW8A8Mxfp8MoEMethod"},
    {method_class::ct_moe_w4a4_mxfp4,
     "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe.compressed_tensors_moe_w4a4_mxfp4."
     "CompressedTensorsW4A4Mxfp4MoEMethod"},
    // compressed_tensors_moe_w4a4_nvfp4.py: dequantize_weight from 0.33.
    {method_class::ct_moe_w4a4_nvfp4,
     "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe.compressed_tensors_moe_w4a4_nvfp4."
     "CompressedTensorsW4A4Nvfp4MoEMethod",
     decode_support::decodes, vllm_release::v0_33},
    {method_class::ct_moe_wna16,
     "vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe.compressed_tensors_moe_wna16."
     "CompressedTensorsWNA16MoEMethod"},
    // modelopt.py: ModelOptLinearMethod.dequantize_weight from 0.32 (MXFP8 weights only),
    // ModelOptNvFp4FusedMoE.dequantize_weight from 0.33.
    {method_class::modelopt_linear, "vllm.model_executor.layers.quantization.modelopt.ModelOptLinearMethod", decode_support::mxfp8_only,
     vllm_release::v0_32, "ModelOpt weight dequantization is only supported for MXFP8."},
    {method_class::modelopt_fp8_moe, "vllm.model_executor.layers.quantization.modelopt.ModelOptFp8MoEMethod"},
    {method_class::modelopt_nvfp4_moe, "vllm.model_executor.layers.quantization.modelopt.ModelOptNvFp4FusedMoE", decode_support::decodes,
     vllm_release::v0_33},
    {method_class::modelopt_mxfp8_moe, "vllm.model_executor.layers.quantization.modelopt.ModelOptMxFp8FusedMoE"},
    // quark/quark.py: QuarkLinearMethod.dequantize_weight from 0.34 (MXFP8 weights only).
    {method_class::quark_linear, "vllm.model_executor.layers.quantization.quark.quark.QuarkLinearMethod", decode_support::mxfp8_only,
     vllm_release::v0_34, "Quark weight dequantization is only supported for MXFP8."},
    {method_class::quark_fp8_moe, "vllm.model_executor.layers.quantization.quark.quark_moe.QuarkW8A8Fp8MoEMethod"},
    {method_class::quark_ocp_mx_moe, "vllm.model_executor.layers.quantization.quark.quark_moe.QuarkOCP_MX_MoEMethod"},
};

constexpr method_row method_table[] = {
    {checkpoint_method::fp8, "fp8", "linear layers and experts not in its ignored layers"},
    {checkpoint_method::compressed_tensors, "compressed-tensors", "the modules its config groups target, less `ignore`"},
    {checkpoint_method::mxfp4, "mxfp4", "the experts (MXFP4); linear layers stay unquantized"},
    {checkpoint_method::gpt_oss_mxfp4, "gpt_oss_mxfp4", "the experts (MXFP4); linear layers stay unquantized"},
    {checkpoint_method::modelopt_fp8, "modelopt", "linear layers, the LM head and experts not in exclude_modules (FP8)"},
    {checkpoint_method::modelopt_fp4, "modelopt_fp4", "linear layers, the LM head and experts not in exclude_modules (NVFP4)"},
    {checkpoint_method::modelopt_mixed, "modelopt_mixed", "the modules quantized_layers names, each by its own quant_algo, less exclude_modules"},
    {checkpoint_method::quark, "quark", "linear layers and experts by their layer_quant_config or global_quant_config, less exclude"},
};

/// A group's scheme in words: its format and weight arguments (and input activations).
std::string group_scheme(const config_group& g) {
  std::string out = "compressed-tensors " + g.name + ": " + (g.format.empty() ? std::string("no format") : g.format) + ", " +
                    (g.weight_type == "int" ? "int" : "float") + std::to_string(g.num_bits) + " weights by " + g.strategy;
  if (g.group_size) out += " of " + std::to_string(*g.group_size);
  if (g.has_input_activations)
    out += ", " + g.input_type + std::to_string(g.input_bits) + (g.input_dynamic ? " dynamic" : " static") + " activations";
  return out;
}

/// compressed_tensors_moe.py get_moe_method's choice of class for a group (or vLLM's error).
std::pair<method_class, std::optional<std::string>> moe_class(const config_group& g) {
  const bool flt = g.weight_type == "float";
  const bool mxfp4 = g.strategy == "group" && flt && g.num_bits == 4 && g.group_size == 32;
  if (mxfp4) return {method_class::ct_moe_w4a4_mxfp4, std::nullopt};
  if (g.strategy == "group" && flt && g.num_bits == 8 && g.group_size == 32 && g.scale_dtype == "torch.uint8")
    return {method_class::ct_moe_w8a8_mxfp8, std::nullopt};
  if ((g.strategy == "channel" || g.strategy == "group") && !g.has_input_activations) {
    if ((g.num_bits == 4 || g.num_bits == 8) && g.format == "pack-quantized") return {method_class::ct_moe_wna16, std::nullopt};
    return {method_class::ct_moe_wna16, "For Fused MoE layers, only format: pack-quantized and bits: [4, 8] is supported but got format: "
                                        "pack-quantized and bits: " + std::to_string(g.num_bits)};
  }
  const bool nvfp4 = g.strategy == "tensor_group" && flt && g.num_bits == 4 && g.group_size == 16;
  if (nvfp4) {
    if (g.has_input_activations && !(g.input_type == "float" && g.input_bits == 4))
      return {method_class::ct_moe_w4a4_nvfp4, "For NVFP4 weights, input quantization must also be NVFP4 format or None for NVFP4A16, "
                                               "found the group's " + g.input_type + std::to_string(g.input_bits) + " activations"};
    return {method_class::ct_moe_w4a4_nvfp4, std::nullopt};
  }
  if (flt && g.num_bits == 8 && g.has_input_activations && g.input_type == "float" &&
      (g.strategy == "tensor" || g.strategy == "channel" || g.strategy == "block"))
    return {method_class::ct_moe_w8a8_fp8, std::nullopt};
  return {method_class::unquantized_moe, "Unsupported FusedMoe scheme: " + group_scheme(g) + " (vLLM prints both QuantizationArgs)"};
}

source_layer unquantized(const layer_desc& l, std::string rule) {
  return {l.kind == layer_kind::moe ? method_class::unquantized_moe : method_class::unquantized_linear, "", std::move(rule), std::nullopt};
}

/// A failed decision: vLLM's error where it builds the layer.
source_layer failed(const layer_desc& l, std::string error) {
  auto s = unquantized(l, "");
  s.error = std::move(error);
  return s;
}

source_layer decide_fp8(const checkpoint_source& s, const model_desc& model, const layer_desc& l) {
  if (l.kind == layer_kind::other) return unquantized(l, "fp8 quantizes no embedding or LM head");
  std::string which;
  if (is_layer_skipped(model, l.name, s.skipped, which)) return unquantized(l, s.skipped_key + " " + text::py_repr(which));
  const std::string rule = "not in " + s.skipped_key;
  if (l.kind == layer_kind::moe) {
    if (s.store_dtype == "mxfp4") return {method_class::mxfp4_moe, "fp8 checkpoint experts stored as MXFP4 (store_dtype)", rule, std::nullopt};
    return {method_class::fp8_moe, s.weight_block_size ? "fp8 experts, 128x128 blocks" : "fp8 experts, per-tensor scales", rule, std::nullopt};
  }
  return {method_class::fp8_linear, s.weight_block_size ? "fp8, 128x128 blocks" : "fp8, per-tensor scale", rule, std::nullopt};
}

source_layer decide_compressed_tensors(const checkpoint_source& s, const model_desc& model, const layer_desc& l,
                                       const std::array<std::string, 3>& expert_projections) {
  const bool lm_head = l.class_name == "ParallelLMHead";
  if (l.kind == layer_kind::other && !lm_head) return unquantized(l, "no config group targets an embedding");
  std::string which;
  if (l.kind != layer_kind::moe) {
    if (should_ignore(model, l.name, s.skipped, which)) return unquantized(l, "ignore " + text::py_repr(which));
    const auto* g = matched_group(s, model, l.name, l.class_name, false, which);
    if (!g) return unquantized(l, "no config group targets it");
    const auto rule = "config_groups." + g->name + " target " + text::py_repr(which);
    if (!g->has_weights) return unquantized(l, rule + " (no weights arguments)");
    return {method_class::ct_linear, group_scheme(*g), rule, std::nullopt};
  }
  // The experts: expert 0's three projections, which must agree.
  const config_group* chosen = nullptr;
  std::string rule;
  for (std::size_t k = 0; k < expert_projections.size(); ++k) {
    const auto name = l.name + ".0." + expert_projections[k];
    std::string w;
    const config_group* g = should_ignore(model, name, s.skipped, w) ? nullptr : matched_group(s, model, name, "RoutedExperts", true, w);
    if (k > 0 && g != chosen) return failed(l, "All MoE projections need to have same quantization scheme but found multiple");
    chosen = g;
    if (k == 0) rule = g ? "config_groups." + g->name + " target " + text::py_repr(w) : w.empty() ? "no config group targets it" : "ignore " + text::py_repr(w);
  }
  if (!chosen || !chosen->has_weights) return unquantized(l, rule);
  const auto [cls, error] = moe_class(*chosen);
  if (error) return failed(l, *error);
  return {cls, group_scheme(*chosen), rule, std::nullopt};
}

/// modelopt.py is_layer_excluded: is_layer_skipped, then containment (an older ModelOpt's exports), then
/// fnmatch wildcards.
bool modelopt_excluded(const checkpoint_source& s, const model_desc& model, const std::string& prefix, std::string& which) {
  if (s.skipped.empty()) return false;
  if (is_layer_skipped(model, prefix, s.skipped, which)) return true;
  constexpr std::string_view language_model = "language_model.";
  for (const auto& e : s.skipped)
    if (e != prefix && (prefix.find(e) != std::string::npos ||
                        (prefix.starts_with(language_model) && prefix.substr(language_model.size()).find(e) != std::string::npos)))
      return which = e, true;
  for (const auto& e : s.skipped) {
    // fnmatch on POSIX is case-sensitive fnmatchcase; an entry without wildcards is equality.
    if (detail::fnmatch_case(e, prefix)) return which = e, true;
  }
  return false;
}

source_layer decide_modelopt(const checkpoint_source& s, const model_desc& model, const layer_desc& l) {
  const bool lm_head = l.class_name == "ParallelLMHead";
  if (l.kind == layer_kind::other && !lm_head) return unquantized(l, "ModelOpt quantizes no embedding");
  std::string which;
  if (modelopt_excluded(s, model, l.name, which)) return unquantized(l, s.skipped_key + " " + text::py_repr(which));
  for (std::string_view vision : {"vision_tower", "vision_model", "vit_large_projector"})
    if (l.name.find(vision) != std::string::npos) return unquantized(l, "ModelOpt leaves " + std::string(vision) + " unquantized");
  const bool fp4 = s.method == checkpoint_method::modelopt_fp4;
  const std::string rule = "not in " + s.skipped_key;
  if (l.kind == layer_kind::moe)
    return {fp4 ? method_class::modelopt_nvfp4_moe : method_class::modelopt_fp8_moe, fp4 ? "ModelOpt NVFP4 experts" : "ModelOpt FP8 experts",
            rule, std::nullopt};
  return {method_class::modelopt_linear, fp4 ? "ModelOpt NVFP4" : "ModelOpt FP8", rule, std::nullopt};
}


/// ModelOpt's linear algos (LINEAR_ALGOS) and how each stores its weight.
struct modelopt_algo_layout {
  std::string_view algo;
  stored_layout layout;
};
constexpr modelopt_algo_layout modelopt_linear_algos[] = {
    {"FP8", stored_layout::fp8_tensor},     {"FP8_PER_CHANNEL_PER_TOKEN", stored_layout::fp8_channel}, {"FP8_PB_WO", stored_layout::fp8_blocks_4d},
    {"NVFP4", stored_layout::nvfp4},        {"W4A16_NVFP4", stored_layout::nvfp4},                     {"MXFP8", stored_layout::mxfp8},
};

/// ModelOptMixedPrecisionConfig._quantized_layer_prefix_candidates.
std::vector<std::string> prefix_candidates(const std::string& prefix) {
  std::vector<std::string> out{prefix};
  if (prefix.ends_with(".lm_head")) out.emplace_back("lm_head");
  constexpr std::string_view a = "language_model.model.", b = "model.language_model.";
  if (prefix.starts_with(a)) out.push_back(std::string(b) + prefix.substr(a.size()));
  else if (prefix.starts_with(b)) out.push_back(std::string(a) + prefix.substr(b.size()));
  if (out.size() == 2 && out[1] == out[0]) out.pop_back();
  return out;
}

/// ModelOptMixedPrecisionConfig._resolve_quant_algo: the entry that gives `prefix` its algo (nullptr: none).
const std::pair<std::string, std::string>* resolve_algo(const checkpoint_source& s, const model_desc& model, const std::string& prefix) {
  const auto& layers = s.quantized_layers;
  auto find = [&](const std::string& key) -> const std::pair<std::string, std::string>* {
    const auto it = std::find_if(layers.begin(), layers.end(), [&](const auto& e) { return e.first == key; });
    return it == layers.end() ? nullptr : &*it;
  };
  auto under = [&](const std::string& prefix_dot) -> const std::pair<std::string, std::string>* {
    const auto it = std::find_if(layers.begin(), layers.end(), [&](const auto& e) { return e.first.starts_with(prefix_dot); });
    return it == layers.end() ? nullptr : &*it;
  };
  // Fused shards, which must agree: `shards(base)` names them under one base candidate.
  auto agreed = [&](const std::vector<std::string>& shard_prefixes) -> const std::pair<std::string, std::string>* {
    const std::pair<std::string, std::string>* first = nullptr;
    std::set<std::string> algos;
    for (const auto& sp : shard_prefixes)
      if (const auto* e = find(sp)) {
        if (!first) first = e;
        algos.insert(e->second);
      }
    if (algos.size() > 1)
      throw config_error("", "Mixed quant_algo within fused layer " + prefix + ": " + text::py_repr_set(algos) +
                                 ". All shards must use the same quantization.");
    return first;
  };
  for (const auto& c : prefix_candidates(prefix))
    if (const auto* e = find(c)) return e;
  const auto dot = prefix.rfind('.');
  const auto proj = dot == std::string::npos ? prefix : prefix.substr(dot + 1);
  const auto base = dot == std::string::npos ? prefix : prefix.substr(0, dot);
  for (const auto& p : model.packed)
    if (p.fused == proj) {
      std::vector<std::string> shard_prefixes;
      for (const auto& bc : prefix_candidates(base))
        for (const auto& sh : p.shards) shard_prefixes.push_back(bc + "." + sh);
      if (const auto* e = agreed(shard_prefixes)) return e;
    }
  for (const auto& c : prefix_candidates(prefix))
    if (const auto* e = under(c + ".")) return e;
  if (prefix.ends_with(".experts"))
    if (const auto* e = under(prefix.substr(0, prefix.rfind(".experts")) + ".")) return e;
  // The parent-prefix fallback for configs that list a fused projection's shards by ModelOpt's names.
  static const std::pair<std::string_view, std::vector<std::string>> fused_projection_shards[] = {
      {"qkv_proj", {"q_proj", "k_proj", "v_proj"}}, {"gate_up_proj", {"gate_proj", "up_proj"}}};
  for (const auto& [fused, shards] : fused_projection_shards)
    if (proj == fused)
      for (const auto& c : prefix_candidates(prefix)) {
        const auto parent = c.substr(0, c.rfind('.') == std::string::npos ? 0 : c.rfind('.'));
        std::vector<std::string> shard_prefixes;
        for (const auto& sh : shards) shard_prefixes.push_back(parent + "." + sh);
        if (const auto* e = agreed(shard_prefixes)) return e;
      }
  return nullptr;
}

source_layer decide_modelopt_mixed(const checkpoint_source& s, const model_desc& model, const layer_desc& l) {
  const bool lm_head = l.class_name == "ParallelLMHead";
  if (l.kind == layer_kind::other && !lm_head) return unquantized(l, "ModelOpt quantizes no embedding");
  std::string which;
  if (modelopt_excluded(s, model, l.name, which)) return unquantized(l, s.skipped_key + " " + text::py_repr(which));
  const auto* entry = resolve_algo(s, model, l.name);
  if (!entry) return unquantized(l, "not in quantized_layers");
  const auto& algo = entry->second;
  const auto rule = "quantized_layers " + text::py_repr(entry->first) + " (quant_algo " + text::py_repr(algo) + ")";
  auto quantized = [&](method_class cls, stored_layout layout) {
    source_layer out{cls, "ModelOpt " + algo + (l.kind == layer_kind::moe ? " experts" : ""), rule, std::nullopt};
    out.layout = layout;
    out.entry = entry->first;
    return out;
  };
  if (l.kind == layer_kind::moe) {
    if (algo == "FP8_PB_WO" || algo == "FP8_BLOCK_SCALES") return quantized(method_class::fp8_moe, stored_layout::unknown);
    if (algo == "FP8") return quantized(method_class::modelopt_fp8_moe, stored_layout::fp8_tensor);
    if (algo == "NVFP4" || algo == "W4A16_NVFP4") return quantized(method_class::modelopt_nvfp4_moe, stored_layout::nvfp4);
    if (algo == "MXFP8") return quantized(method_class::modelopt_mxfp8_moe, stored_layout::mxfp8);
    return unquantized(l, rule + ", which vLLM builds no experts method for");
  }
  for (const auto& row : modelopt_linear_algos)
    if (row.algo == algo) return quantized(method_class::modelopt_linear, row.layout);
  return unquantized(l, rule + ", not one of ModelOpt's linear algos");
}

/// QuarkConfig.get_layer_quant_config_from_name for an unfused name: the first layer_quant_config key
/// that contains the name (a key without `*`) or fnmatches it.
const quark_layer_config* quark_config_of(const checkpoint_source& s, const std::string& name) {
  for (const auto& c : s.quark_layers)
    if (c.pattern.find('*') == std::string::npos ? c.pattern.find(name) != std::string::npos : detail::fnmatch_case(c.pattern, name)) return &c;
  return nullptr;
}

/// QuarkConfig._find_matched_config: a fused layer's shards (named or falling back to the global config)
/// must agree.
const quark_layer_config& quark_matched(const checkpoint_source& s, const model_desc& model, const layer_desc& l) {
  const auto shards = shard_names(model, l.name);
  if (shards.empty()) {
    const auto* c = quark_config_of(s, l.name);
    return c ? *c : s.quark_global;
  }
  std::vector<const quark_layer_config*> configs;
  for (const auto& sh : shards) {
    const auto* c = sh == l.name ? nullptr : quark_config_of(s, sh);
    configs.push_back(c ? c : &s.quark_global);
  }
  for (const auto* c : configs)
    if (c->canonical != configs.front()->canonical) {
      throw config_error("", "Found a different quantization configuration for " + text::py_repr_list(model.fused_entry(l.name)->shards) + " in " + l.name +
                                 ". vLLM requires all to use the same scheme.");
    }
  return *configs.front();
}

source_layer decide_quark(const checkpoint_source& s, const model_desc& model, const layer_desc& l) {
  if (l.kind == layer_kind::other) return unquantized(l, "Quark quantizes no embedding or LM head");
  std::string which;
  // Experts: an exclude entry naming the layer or one of its children excludes them all.
  if (l.kind == layer_kind::moe)
    for (const auto& e : s.skipped)
      if (!match::is_regex_pattern(e) && (e == l.name || e.starts_with(l.name + "."))) return unquantized(l, "exclude " + text::py_repr(e));
  if (should_ignore(model, l.name, s.skipped, which)) return unquantized(l, "exclude " + text::py_repr(which));
  const auto& config = quark_matched(s, model, l);
  const auto& t = l.kind == layer_kind::moe ? config.moe : config.linear;
  const auto rule = config.pattern.empty() ? std::string("global_quant_config") : "layer_quant_config " + text::py_repr(config.pattern);
  if (t.error) return failed(l, *t.error);
  source_layer out{t.cls, t.scheme, rule, std::nullopt};
  out.layout = t.layout;
  out.entry = config.pattern;
  return out;
}
}  // namespace

/// Each table holds one row per enumerator, at the enumerator's index.
template <class Row, std::size_t N>
constexpr bool indexed_by_id(const Row (&rows)[N], std::size_t count) {
  for (std::size_t i = 0; i < N; ++i)
    if (static_cast<std::size_t>(rows[i].id) != i) return false;
  return N == count;
}
static_assert(indexed_by_id(class_table, static_cast<std::size_t>(method_class::quark_ocp_mx_moe) + 1));
static_assert(indexed_by_id(method_table, static_cast<std::size_t>(checkpoint_method::quark) + 1));

const class_row& class_of(method_class c) { return class_table[static_cast<std::size_t>(c)]; }
const method_row& method_of(checkpoint_method m) { return method_table[static_cast<std::size_t>(m)]; }

source_layer checkpoint_source::decide(const model_desc& model, const layer_desc& layer) const {
  // A router is built without the quantization config (quant_config=None in vLLM's models).
  if (!layer.quantizable) return unquantized(layer, "built without a quantization config");
  try {
    switch (method) {
      case checkpoint_method::fp8: return decide_fp8(*this, model, layer);
      case checkpoint_method::compressed_tensors: return decide_compressed_tensors(*this, model, layer, expert_projections);
      case checkpoint_method::mxfp4:
      case checkpoint_method::gpt_oss_mxfp4:
        if (layer.kind == layer_kind::moe) return {method_class::mxfp4_moe, "MXFP4 experts (gpt-oss blocks and scales)", "every expert", std::nullopt};
        return unquantized(layer, layer.kind == layer_kind::linear ? "MXFP4 leaves linear layers unquantized" : "");
      case checkpoint_method::modelopt_fp8:
      case checkpoint_method::modelopt_fp4: return decide_modelopt(*this, model, layer);
      case checkpoint_method::modelopt_mixed: return decide_modelopt_mixed(*this, model, layer);
      case checkpoint_method::quark: return decide_quark(*this, model, layer);
    }
  } catch (const config_error& e) {
    return failed(layer, e.what());
  }
  return unquantized(layer, "");
}

std::string checkpoint_source::describe() const {
  std::string out = "quant_method " + text::py_repr(quant_method) + " (vLLM's " + std::string(method_of(method).vllm_name) + ": " +
                    std::string(method_of(method).quantizes) + ")";
  if (!quant_algo.empty()) out += ", quant_algo " + text::py_repr(quant_algo);
  if (!quantized_layers.empty()) out += fmt::format(", {} quantized_layers entr{}", quantized_layers.size(), quantized_layers.size() == 1 ? "y" : "ies");
  if (method == checkpoint_method::quark) out += fmt::format(", {} layer_quant_config entr{}", quark_layers.size(), quark_layers.size() == 1 ? "y" : "ies");
  if (weight_block_size) out += fmt::format(", weight_block_size [{}, {}]", (*weight_block_size)[0], (*weight_block_size)[1]);
  if (!groups.empty()) out += fmt::format(", {} config group{}", groups.size(), groups.size() == 1 ? "" : "s");
  if (!skipped_key.empty()) out += fmt::format(", {} {} entr{}", skipped.size(), skipped_key, skipped.size() == 1 ? "y" : "ies");
  return out;
}

}  // namespace qpolicy::source
