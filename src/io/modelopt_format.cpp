// ModelOpt's MIXED_PRECISION quantization_config (checkpoint_format.hpp): the output format of a ModelOpt
// NVFP4 checkpoint whose layers stay as stored beside online ones. vLLM 0.34's ModelOptMixedPrecisionConfig
// (modelopt.py) reads `quantization.quantized_layers` (module -> its own quant_algo) and
// `quantization.exclude_modules`; _resolve_quant_algo finds a layer by its name, its fused shards, or (for
// routed experts) any key under its prefix, and `resolve` turns each algo into the (weight, activation) keys.
#include <algorithm>
#include <optional>
#include <string>

#include "checkpoint_format.hpp"
#include "qpolicy/config/config.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy::checkpoint_io {

namespace {

namespace json = boost::json;

/// The ModelOpt linear algos an online method is written as: `resolve` gives each the method's weight
/// key and its default (dynamic) activation. ModelOpt's FP8 per tensor has a static activation scale,
/// which online quantization does not calibrate; NVFP4 needs its calibrated input_scale too.
struct modelopt_algo_row {
  method m;
  std::string_view algo;
};
constexpr modelopt_algo_row modelopt_linear_algos[] = {
    {method::fp8_per_channel, "FP8_PER_CHANNEL_PER_TOKEN"},
    {method::fp8_per_block, "FP8_PB_WO"},
    {method::mxfp8, "MXFP8"},
};

/// The kv-cache algo of the checkpoint's config: `quantization.kv_cache_quant_algo`, or an 8-bit float
/// `kv_cache_scheme` (vLLM's from_config reads either), else null.
json::value kv_cache_algo(const json::object& checkpoint_config) {
  if (const auto* nested = checkpoint_config.if_contains("quantization"); nested && nested->is_object())
    if (const auto* kv = nested->get_object().if_contains("kv_cache_quant_algo"); kv && kv->is_string()) return *kv;
  if (const auto* kv = checkpoint_config.if_contains("kv_cache_scheme"); kv && kv->is_object()) {
    const auto& o = kv->get_object();
    const auto* type = o.if_contains("type");
    const auto* bits = o.if_contains("num_bits");
    if (type && *type == "float" && bits && bits->is_int64() && bits->get_int64() == 8) return "FP8";
  }
  return nullptr;
}

}  // namespace

std::optional<std::string_view> modelopt_algo(method m, layer_kind kind, std::optional<key_id> activation) {
  if (kind != layer_kind::linear || activation != schemes::default_activation(m, kind)) return std::nullopt;
  for (const auto& row : modelopt_linear_algos)
    if (row.m == m) return row.algo;
  return std::nullopt;
}

std::string modelopt_algos_text() {
  std::string out;
  for (const auto& row : modelopt_linear_algos)
    out += (out.empty() ? "" : ", ") + std::string(to_string(row.m)) + " as " + std::string(row.algo);
  return out;
}

json::object modelopt_nvfp4_entry(std::int64_t group_size) {
  // check_stored_tensors has proved the kept tensors NVFP4 blocks of group_size (weight_scale [N, K/group_size]).
  return {{"group_size", group_size}, {"quant_algo", "NVFP4"}};
}

json::object modelopt_mixed_quantization_config(const model_desc& model, const plan& online,
                                                const std::vector<std::pair<std::string, json::object>>& kept,
                                                const std::function<bool(std::size_t)>& unquantized, const json::object& checkpoint_config) {
  json::object layers;
  for (const auto& [name, entry] : kept) layers[name] = entry;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& l = online.layers[i];
    if (!l.quantized()) continue;
    const auto algo = *modelopt_algo(l.decided, model.layers[i].kind, activation_of(l, model.layers[i].kind));
    for (const auto& name : layer_module_names(model, model.layers[i], false)) layers[name] = json::object{{"quant_algo", algo}};
  }
  json::array exclude;
  for (const auto& name : unquantized_modules_if(model, unquantized, false)) {
    // is_layer_excluded also excludes any layer whose name merely contains an entry.
    for (const auto& [module, entry] : layers)
      if (module != name && std::string_view(module).find(name) != std::string_view::npos)
        throw config_error("", "module " + std::string(module) + " is quantized, but ModelOpt's exclude_modules entry " + text::py_repr(name) +
                                   " (an unquantized module) would exclude it too: vLLM's is_layer_excluded matches by containment");
    exclude.emplace_back(name);
  }
  return {{"producer", json::object{{"name", "qpolicy"}}},
          {"quant_method", "modelopt"},
          {"quantization", json::object{{"exclude_modules", std::move(exclude)},
                                        {"kv_cache_quant_algo", kv_cache_algo(checkpoint_config)},
                                        {"quant_algo", "MIXED_PRECISION"},
                                        {"quantized_layers", std::move(layers)}}}};
}

}  // namespace qpolicy::checkpoint_io
