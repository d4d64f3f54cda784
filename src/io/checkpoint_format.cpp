// The checkpoint formats (checkpoint_format.hpp): what each can express, and its quantization_config.
#include "checkpoint_format.hpp"

#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "qpolicy/config/config.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy {

std::string_view to_string(checkpoint_format f) {
  constexpr std::string_view names[] = {"automatic", "vllm-fp8", "compressed-tensors"};
  return names[static_cast<std::size_t>(f)];
}

namespace checkpoint_io {

namespace {

namespace json = boost::json;

/// The activation key a quantized layer runs with (nullopt: weight-only).
std::optional<key_id> activation_of(const layer_plan& l, layer_kind kind) {
  switch (l.activation) {
    case activation_kind::method_default: return schemes::default_activation(l.decided, kind);
    case activation_kind::none: return std::nullopt;
    case activation_kind::key: return l.activation_key;
  }
  return std::nullopt;
}

/// A pattern's text matching `s` literally (Python's re.escape for the characters names can hold).
std::string regex_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\.^$|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

/// The checkpoint module names of a layer: a fused layer's shards, a MoE layer's expert projections
/// (as a pattern, or the layer's own name), else the layer's name.
void add_module_names(const model_desc& model, const layer_desc& layer, bool moe_as_pattern, std::vector<std::string>& out) {
  if (layer.kind == layer_kind::moe) {
    out.push_back(moe_as_pattern ? "re:^" + regex_escape(layer.name) + "\\.\\d+\\.(gate_proj|up_proj|down_proj|w1|w2|w3)$"
                                 : layer.name);
    return;
  }
  if (const auto* fused = model.fused_entry(layer.name)) {
    for (const auto& s : fused->shards) out.push_back(text::replace_all(layer.name, fused->fused, s));
    return;
  }
  out.push_back(layer.name);
}

/// compressed-tensors' QuantizationArgs for an FP8 tensor: symmetric float 8-bit, the strategy and
/// block/group fields of the layout, keys sorted as transformers writes config.json.
json::object fp8_args(std::string_view strategy, bool dynamic, std::optional<std::int64_t> group_size, bool blocks) {
  json::object a;
  a["actorder"] = nullptr;
  a["block_structure"] = blocks ? json::value(json::array{schemes::block_k, schemes::block_k}) : json::value(nullptr);
  a["dynamic"] = dynamic;
  a["group_size"] = group_size ? json::value(*group_size) : json::value(nullptr);
  a["num_bits"] = 8;
  a["observer"] = dynamic ? json::value(nullptr) : json::value("memoryless_minmax");
  a["observer_kwargs"] = json::object{};
  a["scale_dtype"] = nullptr;
  a["strategy"] = strategy;
  a["symmetric"] = true;
  a["type"] = "float";
  a["zp_dtype"] = nullptr;
  return a;
}

json::object weight_args(method m) {
  switch (*schemes::contract_of(m).scales) {
    case fp8::weight_scales::per_tensor: return fp8_args("tensor", false, std::nullopt, false);
    case fp8::weight_scales::per_channel: return fp8_args("channel", false, std::nullopt, false);
    case fp8::weight_scales::block_128x128: return fp8_args("block", false, std::nullopt, true);
  }
  return {};
}

/// The input_activations arguments of a dynamic FP8 activation key; nullopt for a key that is not one.
std::optional<json::value> activation_args(std::optional<key_id> k) {
  if (!k) return json::value(nullptr);
  const auto& key = key_of(*k);
  if (key.data != dtype::f8e4m3fn || key.scale.is_static) return std::nullopt;
  if (key.scale.group == per_tensor) return json::value(fp8_args("tensor", true, std::nullopt, false));
  if (key.scale.group == per_token) return json::value(fp8_args("token", true, std::nullopt, false));
  if (key.scale.group.row == 1 && key.scale.group.col > 0)
    return json::value(fp8_args("group", true, key.scale.group.col, false));
  return std::nullopt;
}

std::string activation_text(std::optional<key_id> k) { return k ? key_name(*k) : std::string("none (weight-only)"); }

}  // namespace

std::vector<std::string> unquantized_modules(const model_desc& model, const plan& p, bool moe_as_pattern) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& layer = model.layers[i];
    if (p.layers[i].quantized()) continue;
    // Embeddings are no linear module; the LM head is one in transformers (nn.Linear).
    if (layer.kind == layer_kind::other && layer.class_name != "ParallelLMHead") continue;
    add_module_names(model, layer, moe_as_pattern, out);
  }
  return out;
}

checkpoint_format choose_format(checkpoint_format requested, const model_desc& model, const plan& p,
                                std::vector<std::string>& warnings) {
  std::set<method> methods;
  for (const auto& l : p.layers)
    if (l.quantized()) methods.insert(l.decided);
  if (requested == checkpoint_format::automatic)
    return methods.size() == 1 && schemes::contract_of(*methods.begin()).scales == fp8::weight_scales::block_128x128
               ? checkpoint_format::vllm_fp8
               : checkpoint_format::compressed_tensors;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& l = p.layers[i];
    if (!l.quantized() || !schemes::has_kernels(l.decided)) continue;  // the writer refuses the others by name
    const auto& layer = model.layers[i];
    const auto activation = activation_of(l, layer.kind);
    const auto method_name = std::string(to_string(l.decided));
    if (requested == checkpoint_format::vllm_fp8) {
      if (schemes::contract_of(l.decided).scales == fp8::weight_scales::per_channel)
        throw config_error("", "layer " + layer.name + " is planned as " + method_name +
                                   ", which --format vllm-fp8 cannot express (vLLM's fp8 checkpoint method has no per-channel "
                                   "weights); --format compressed-tensors can");
      if (methods.size() > 1)
        throw config_error("", "the plan mixes " + std::to_string(methods.size()) +
                                   " schemes, which --format vllm-fp8 cannot express (one fp8 quantization_config describes "
                                   "one weight layout); --format compressed-tensors can");
      if (activation != schemes::default_activation(l.decided, layer.kind))
        throw config_error("", "layer " + layer.name + " is planned with " + activation_text(activation) +
                                   " activations, which --format vllm-fp8 cannot express (vLLM's fp8 checkpoint method picks "
                                   "the activation quantization itself); --format compressed-tensors can");
    } else if (!activation_args(activation)) {
      throw config_error("", "layer " + layer.name + " is planned with " + activation_text(activation) +
                                 " activations, which a checkpoint cannot express: a static activation scale comes from "
                                 "calibration, which online quantization does not run");
    }
  }
  if (requested == checkpoint_format::vllm_fp8 && methods.size() == 1 &&
      schemes::contract_of(*methods.begin()).scales == fp8::weight_scales::per_tensor)
    warnings.push_back("--format vllm-fp8 with " + std::string(to_string(*methods.begin())) +
                       ": vLLM loads it, but transformers' fp8 method reads only 128x128 blocks and would ignore the "
                       "weight_scale tensors (a scale of 1); --format compressed-tensors loads correctly in both");
  return requested;
}

std::string_view scale_suffix(checkpoint_format f, method m) {
  return f == checkpoint_format::compressed_tensors ? std::string_view("weight_scale") : schemes::contract_of(m).checkpoint_scale;
}

json::object quantization_config(checkpoint_format f, const model_desc& model, const plan& p) {
  if (f == checkpoint_format::vllm_fp8) {
    json::object qc{{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}};
    for (const auto& l : p.layers)
      if (l.quantized() && schemes::contract_of(l.decided).scales == fp8::weight_scales::block_128x128) {
        qc["weight_block_size"] = json::array{schemes::block_k, schemes::block_k};
        break;
      }
    json::array ignored;
    for (const auto& name : unquantized_modules(model, p, false)) ignored.emplace_back(name);
    if (!ignored.empty()) {
      qc["ignored_layers"] = ignored;            // vLLM's Fp8Config
      qc["modules_to_not_convert"] = ignored;    // transformers' FineGrainedFP8Config
    }
    return qc;
  }
  // One config group per (weight layout, activation) pair, in the order the model first uses them.
  std::vector<std::tuple<method, std::optional<key_id>, std::vector<std::string>>> groups;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& l = p.layers[i];
    if (!l.quantized()) continue;
    const auto& layer = model.layers[i];
    const auto activation = activation_of(l, layer.kind);
    auto it = groups.begin();
    while (it != groups.end() && !(std::get<0>(*it) == l.decided && std::get<1>(*it) == activation)) ++it;
    if (it == groups.end()) it = groups.insert(groups.end(), {l.decided, activation, {}});
    add_module_names(model, layer, true, std::get<2>(*it));
  }
  json::object config_groups;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& [m, activation, modules] = groups[g];
    json::object group;
    group["format"] = "float-quantized";
    group["input_activations"] = *activation_args(activation);
    group["output_activations"] = nullptr;
    // One group targets every linear module (as llm-compressor writes it; vLLM maps Linear onto its
    // fused MoE layers too); several name their modules.
    json::array targets;
    if (groups.size() == 1) targets.emplace_back("Linear");
    else
      for (const auto& name : modules) targets.emplace_back(name);
    group["targets"] = targets;
    group["weights"] = weight_args(m);
    config_groups["group_" + std::to_string(g)] = group;
  }
  json::array ignore;
  for (const auto& name : unquantized_modules(model, p, true)) ignore.emplace_back(name);
  return json::object{{"config_groups", config_groups},
                      {"format", "float-quantized"},
                      {"global_compression_ratio", nullptr},
                      {"ignore", ignore},
                      {"kv_cache_scheme", nullptr},
                      {"quant_method", "compressed-tensors"},
                      {"quantization_status", "compressed"},
                      {"sparsity_config", json::object{}},
                      {"transform_config", json::object{}},
                      {"version", "0.19.0"}};
}

}  // namespace checkpoint_io

}  // namespace qpolicy
