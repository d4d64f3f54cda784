// vLLM's checkpoint methods' layer rules (checkpoint_source.hpp names the vLLM sources each follows);
// checkpoint_config.cpp reads the quantization_config they take.
#include "qpolicy/source/checkpoint_source.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "qpolicy/config/config.hpp"
#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/match/pattern.hpp"
#include "checkpoint_matching.hpp"

namespace qpolicy::source {

namespace {

using detail::is_layer_skipped;
using detail::matched_group;
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
     vllm_release::v0_32},
    {method_class::modelopt_fp8_moe, "vllm.model_executor.layers.quantization.modelopt.ModelOptFp8MoEMethod"},
    {method_class::modelopt_nvfp4_moe, "vllm.model_executor.layers.quantization.modelopt.ModelOptNvFp4FusedMoE", decode_support::decodes,
     vllm_release::v0_33},
};

constexpr method_row method_table[] = {
    {checkpoint_method::fp8, "fp8", "linear layers and experts not in its ignored layers"},
    {checkpoint_method::compressed_tensors, "compressed-tensors", "the modules its config groups target, less `ignore`"},
    {checkpoint_method::mxfp4, "mxfp4", "the experts (MXFP4); linear layers stay unquantized"},
    {checkpoint_method::gpt_oss_mxfp4, "gpt_oss_mxfp4", "the experts (MXFP4); linear layers stay unquantized"},
    {checkpoint_method::modelopt_fp8, "modelopt", "linear layers, the LM head and experts not in exclude_modules (FP8)"},
    {checkpoint_method::modelopt_fp4, "modelopt_fp4", "linear layers, the LM head and experts not in exclude_modules (NVFP4)"},
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
    const auto r = match::match_one(e, prefix, match::glob_mode::on);
    if (r.matched) return which = e, true;
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

}  // namespace

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
  if (weight_block_size) out += fmt::format(", weight_block_size [{}, {}]", (*weight_block_size)[0], (*weight_block_size)[1]);
  if (!groups.empty()) out += fmt::format(", {} config group{}", groups.size(), groups.size() == 1 ? "" : "s");
  if (!skipped_key.empty()) out += fmt::format(", {} {} entr{}", skipped.size(), skipped_key, skipped.size() == 1 ? "y" : "ies");
  return out;
}

}  // namespace qpolicy::source
