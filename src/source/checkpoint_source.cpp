// A quantized checkpoint's quantization_config read, and vLLM's checkpoint methods' layer rules
// (checkpoint_source.hpp names the vLLM sources each follows).
#include "qpolicy/source/checkpoint_source.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "qpolicy/config/config.hpp"
#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/match/pattern.hpp"
#include "checkpoint_matching.hpp"

namespace qpolicy::source {

namespace {

namespace json = boost::json;
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

/// Python's type of a JSON value, as `type(v)` prints.
std::string py_type(const json::value& v) {
  if (v.is_string()) return "<class 'str'>";
  if (v.is_bool()) return "<class 'bool'>";
  if (v.is_int64() || v.is_uint64()) return "<class 'int'>";
  if (v.is_double()) return "<class 'float'>";
  if (v.is_object()) return "<class 'dict'>";
  if (v.is_array()) return "<class 'list'>";
  return "<class 'NoneType'>";
}

/// Python's str of a JSON value a message quotes.
std::string quoted(const json::value& v) {
  if (v.is_string()) return text::py_repr(std::string_view(v.get_string()));
  return json::serialize(v);
}

/// A list of strings at `key` (absent or null: empty); anything else is refused.
std::vector<std::string> string_list(const json::object& o, std::string_view key, std::string_view where) {
  std::vector<std::string> out;
  const auto* v = o.if_contains(key);
  if (!v || v->is_null()) return out;
  if (!v->is_array())
    throw config_error("", std::string(where) + "." + std::string(key) + " is " + quoted(*v) + "; expected a list of module names");
  for (const auto& e : v->get_array()) {
    if (!e.is_string())
      throw config_error("", std::string(where) + "." + std::string(key) + " holds " + quoted(e) + "; expected module names (strings)");
    out.emplace_back(e.get_string());
  }
  return out;
}

/// vLLM's get_from_keys: a required key, or its ValueError.
const json::value& required(const json::object& o, std::string_view key) {
  if (const auto* v = o.if_contains(key)) return *v;
  throw config_error("", "Cannot find any of ['" + std::string(key) + "'] in the model's quantization config.");
}

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

/// One compressed-tensors QuantizationArgs object's fields the rules read.
void read_args(const json::object& a, const std::string& where, bool weights, config_group& g) {
  auto str = [&](std::string_view key) -> std::string {
    const auto* v = a.if_contains(key);
    if (!v || v->is_null()) return "";
    if (!v->is_string()) throw config_error("", where + "." + std::string(key) + " is " + quoted(*v) + "; expected a string");
    return std::string(v->get_string());
  };
  const auto* bits = a.if_contains("num_bits");
  const int num_bits = bits && bits->is_int64() ? static_cast<int>(bits->get_int64()) : 8;  // pydantic's default
  const auto type = str("type").empty() ? std::string("int") : str("type");
  if (weights) {
    g.has_weights = true;
    g.num_bits = num_bits;
    g.weight_type = type;
    g.strategy = str("strategy");
    g.scale_dtype = str("scale_dtype");
    const auto* sym = a.if_contains("symmetric");
    g.symmetric = !sym || !sym->is_bool() || sym->get_bool();  // pydantic's default is True
    if (const auto* gs = a.if_contains("group_size"); gs && gs->is_int64()) g.group_size = gs->get_int64();
    if (const auto* b = a.if_contains("block_structure"); b && b->is_array() && b->get_array().size() == 2 &&
                                                           b->get_array()[0].is_int64() && b->get_array()[1].is_int64())
      g.block_structure = std::array<std::int64_t, 2>{b->get_array()[0].get_int64(), b->get_array()[1].get_int64()};
  } else {
    g.has_input_activations = true;
    g.input_bits = num_bits;
    g.input_type = type;
    const auto* d = a.if_contains("dynamic");
    g.input_dynamic = d && ((d->is_bool() && d->get_bool()) || (d->is_string() && d->get_string() == "local"));
  }
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

checkpoint_source read_checkpoint_source(const json::value& qc, std::string_view model_type) {
  if (!qc.is_object()) throw config_error("", "the checkpoint's quantization_config is " + quoted(qc) + "; expected an object");
  const auto& o = qc.get_object();
  const auto& m = required(o, "quant_method");
  if (!m.is_string()) throw config_error("", "the checkpoint's quant_method is " + quoted(m) + "; expected a method name (a string)");
  checkpoint_source s;
  s.quant_method = std::string(m.get_string());
  std::string lower = s.quant_method;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string where = "quantization_config";
  if (s.quant_method == "fp8") {
    s.method = checkpoint_method::fp8;
    const auto& act = required(o, "activation_scheme");
    if (!act.is_string() || (act.get_string() != "static" && act.get_string() != "dynamic"))
      throw config_error("", "Unsupported activation scheme " + (act.is_string() ? std::string(act.get_string()) : quoted(act)));
    s.skipped = string_list(o, "ignored_layers", where);
    s.skipped_key = "ignored_layers";
    if (s.skipped.empty()) {
      s.skipped = string_list(o, "modules_to_not_convert", where);
      if (!s.skipped.empty()) s.skipped_key = "modules_to_not_convert";
    }
    if (const auto* b = o.if_contains("weight_block_size"); b && !b->is_null()) {
      if (!b->is_array() || b->get_array().size() != 2 || !b->get_array()[0].is_int64() || !b->get_array()[1].is_int64())
        throw config_error("", "The quantization block size of weight must have 2 dimensions, but got " + quoted(*b));
      if (act.get_string() != "dynamic")
        throw config_error("", "The block-wise quantization only supports dynamic activation scheme for now, but got " +
                                   std::string(act.get_string()) + " activation scheme.");
      s.weight_block_size = std::array<std::int64_t, 2>{b->get_array()[0].get_int64(), b->get_array()[1].get_int64()};
    }
    if (const auto* d = o.if_contains("store_dtype"); d && d->is_string()) s.store_dtype = std::string(d->get_string());
    return s;
  }
  if (s.quant_method == "compressed-tensors") {
    s.method = checkpoint_method::compressed_tensors;
    s.skipped = string_list(o, "ignore", where);
    s.skipped_key = "ignore";
    std::string format;
    if (const auto* f = o.if_contains("format"); f && f->is_string()) format = std::string(f->get_string());
    if (const auto* groups = o.if_contains("config_groups"); groups && !groups->is_null()) {
      if (!groups->is_object()) throw config_error("", "quantization_config.config_groups is " + quoted(*groups) + "; expected an object");
      for (const auto& [name, value] : groups->get_object()) {
        const std::string at = where + ".config_groups." + std::string(name);
        if (!value.is_object()) throw config_error("", at + " is " + quoted(value) + "; expected an object");
        const auto& go = value.get_object();
        config_group g;
        g.name = std::string(name);
        g.targets = string_list(go, "targets", at);
        // vLLM drops a group whose only target is an attention module (KV-cache quantization).
        if (g.targets.size() == 1 && g.targets.front().ends_with("Attention")) continue;
        g.format = format;
        if (const auto* f = go.if_contains("format"); f && f->is_string()) g.format = std::string(f->get_string());
        if (const auto* w = go.if_contains("weights"); w && w->is_object()) read_args(w->get_object(), at + ".weights", true, g);
        if (const auto* a = go.if_contains("input_activations"); a && a->is_object())
          read_args(a->get_object(), at + ".input_activations", false, g);
        s.groups.push_back(std::move(g));
      }
    }
    if (const auto* t = o.if_contains("transform_config"); t && t->is_object() && !t->get_object().empty()) {
      s.has_transform_config = true;
      if (const auto* groups = t->get_object().if_contains("config_groups"); groups && groups->is_object())
        for (const auto& [name, value] : groups->get_object()) s.transform_schemes.emplace_back(name);
    }
    return s;
  }
  if (s.quant_method == "mxfp4" || s.quant_method == "gpt_oss_mxfp4") {
    s.method = model_type == "gpt_oss" ? checkpoint_method::gpt_oss_mxfp4 : checkpoint_method::mxfp4;
    return s;
  }
  if (lower.starts_with("modelopt")) {
    const json::object* from = &o;
    s.skipped_key = "ignore";
    if (const auto* nested = o.if_contains("quantization")) {
      if (!nested->is_object()) throw config_error("", "Expected 'quantization' to be a dictionary in config");
      from = &nested->get_object();
      s.skipped_key = "exclude_modules";
    } else if (!o.contains("ignore")) {
      s.skipped_key = "exclude_modules";
    }
    const auto* algo = from->if_contains("quant_algo");
    if (!algo || algo->is_null() || (algo->is_string() && algo->get_string().empty()))
      throw config_error("", "Missing 'quant_algo' in quantization config");
    s.quant_algo = algo->is_string() ? std::string(algo->get_string()) : json::serialize(*algo);
    for (auto& c : s.quant_algo) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (s.quant_algo == "FP8") s.method = checkpoint_method::modelopt_fp8;
    else if (s.quant_algo == "NVFP4") s.method = checkpoint_method::modelopt_fp4;
    else
      throw config_error("", "the checkpoint's ModelOpt quant_algo is " + text::py_repr(s.quant_algo) +
                                 ", which this build does not read; it reads 'FP8' and 'NVFP4'");
    const auto* list = from->if_contains(s.skipped_key);
    if (list && !list->is_array()) throw config_error("", "exclude_modules must be a list, got " + py_type(*list));
    s.skipped = string_list(*from, s.skipped_key, where);
    return s;
  }
  throw config_error("", "the checkpoint's quantization_config has quant_method " + text::py_repr(s.quant_method) +
                             ", which this build does not read; it reads 'fp8', 'compressed-tensors', 'mxfp4' (gpt-oss) and "
                             "'modelopt' (FP8 and NVFP4)");
}

}  // namespace qpolicy::source
