// The checkpoint configs that name each layer's scheme (config_fields.hpp): Quark's (quark/quark.py,
// quark_moe.py) and ModelOpt MIXED_PRECISION's (modelopt.py ModelOptMixedPrecisionConfig), read and
// checked before any layer rule runs. Each Quark layer config is evaluated once here into what vLLM
// builds from it for a linear layer and for the experts; the layer rules then only match names.
#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "checkpoint_matching.hpp"
#include "config_fields.hpp"
#include "qpolicy/config/config.hpp"
#include "qpolicy/core/detail/text.hpp"

namespace qpolicy::source::detail {

namespace {

namespace json = boost::json;
using target = quark_layer_config::target;

/// Quark's one-entry lists stand for their entry; longer lists are multi-entry specs (NVFP4, W4A8).
struct unwrapped {
  const json::value* spec = nullptr;  // nullptr: None
  bool multi = false;
};
unwrapped unwrap(const json::value* v) {
  if (!v || v->is_null()) return {};
  if (v->is_array()) {
    const auto& a = v->get_array();
    if (a.size() > 1) return {nullptr, true};
    return {a.size() == 1 ? &a[0] : nullptr, false};
  }
  return {v, false};
}

/// `spec.get(key)` of a dict spec (nullptr when absent or the spec is not a dict).
const json::value* field(const json::value* spec, std::string_view key) {
  if (!spec || !spec->is_object()) return nullptr;
  return spec->get_object().if_contains(key);
}
bool truthy_field(const json::value* spec, std::string_view key) {
  const auto* v = field(spec, key);
  return v && truthy(*v);
}
bool equals(const json::value* v, std::string_view s) { return v && v->is_string() && v->get_string() == s; }
bool is_true(const json::value* v) { return v && v->is_bool() && v->get_bool(); }
bool is_int(const json::value* v, std::int64_t n) { return v && integer(*v) == n; }

/// _is_fp8_w8a8: FP8 weights per tensor, per channel or in 128x128 blocks with FP8 activations; the layout
/// of the weight's scales, or nullopt.
std::optional<stored_layout> fp8_w8a8(const json::value* w, const json::value* in) {
  if (!w || !w->is_object() || !in || !in->is_object()) return std::nullopt;
  if (!equals(field(w, "dtype"), "fp8_e4m3") || !equals(field(in, "dtype"), "fp8_e4m3") || truthy_field(w, "is_dynamic")) return std::nullopt;
  const auto* block = field(w, "block_size");
  const bool block_128 = block && block->is_array() && block->get_array().size() == 2 && is_int(&block->get_array()[0], 128) &&
                         is_int(&block->get_array()[1], 128);
  if (equals(field(w, "qscheme"), "per_block") && block_128 && is_true(field(w, "symmetric"))) {
    if (!truthy_field(in, "is_dynamic") || !equals(field(in, "qscheme"), "per_group") || !is_int(field(in, "group_size"), 128) ||
        !is_true(field(in, "symmetric")))
      return std::nullopt;
    // E8M0 block scales are another layout, not checked here.
    return equals(field(w, "scale_type"), "float8_e8m0fnu") ? stored_layout::unknown : stored_layout::fp8_blocks;
  }
  const bool channel = equals(field(w, "qscheme"), "per_channel");
  if (!channel && !equals(field(w, "qscheme"), "per_tensor")) return std::nullopt;
  if (!truthy_field(in, "is_dynamic") && !equals(field(in, "qscheme"), "per_tensor")) return std::nullopt;
  return channel ? stored_layout::fp8_channel : stored_layout::fp8_tensor;
}

/// Whether `mx` is one of vLLM's OCP MX key names (_WEIGHT_QUANT_KEY_MAP and _ACTIVATION_QUANT_KEY_MAP hold the same four).
bool ocp_mx_key(std::string_view mx) { return mx == "mxfp4" || mx == "mxfp6_e3m2" || mx == "mxfp6_e2m3" || mx == "mxfp8_e4m3"; }

/// ocp_mx_weight_dtype_and_rows: the OCP MX dtype of a weight spec ("mxfp4", "mxfp8_e4m3", ...), or "".
std::string ocp_mx_dtype(const json::value* w) {
  const auto* dtype = field(w, "dtype");
  if (!dtype || !dtype->is_string()) return "";
  auto mx = text::replace_all(std::string(dtype->get_string()), "fp", "mxfp");
  if (!ocp_mx_key(mx)) return "";
  if (equals(field(w, "qscheme"), "per_group"))
    return is_int(field(w, "group_size"), 32) && equals(field(w, "scale_format"), "e8m0") ? mx : "";
  if (!equals(field(w, "qscheme"), "per_block") || mx != "mxfp8_e4m3") return "";
  const auto* block = field(w, "block_size");
  if (!block || !block->is_array() || block->get_array().size() != 2 || !is_int(&block->get_array()[1], 32)) return "";
  if (!equals(field(w, "scale_type"), "float8_e8m0fnu") || !is_true(field(w, "symmetric")) || truthy_field(w, "is_dynamic")) return "";
  return is_int(&block->get_array()[0], 1) ? mx : mx + " in 2-D scale blocks";
}

/// _is_w_ocp_mx_a_x's activation side: whether the input spec is one vLLM runs beside OCP MX weights (a
/// static one only where `allow_static_fp8`), or its ValueError.
std::optional<bool> ocp_mx_input(const json::value* in, bool allow_static_fp8, std::string& error, const std::string& where) {
  if (!in) return true;
  if (!in->is_object()) return false;
  if (!truthy_field(in, "is_dynamic"))
    return allow_static_fp8 && equals(field(in, "dtype"), "fp8_e4m3") && equals(field(in, "qscheme"), "per_tensor") && is_true(field(in, "symmetric"));
  const auto* dtype = field(in, "dtype");
  if (!dtype || !dtype->is_string()) {
    error = where + ".input_tensors.dtype is " + (dtype ? quoted(*dtype) : std::string("missing")) + "; expected an activation dtype name such as 'fp8_e4m3'";
    return std::nullopt;
  }
  if (dtype->get_string() == "fp8_e4m3") return true;
  const auto mx = text::replace_all(std::string(dtype->get_string()), "fp", "mxfp");
  if (!ocp_mx_key(mx)) {
    error = "Unsupported input_dtype=" + mx + " in Quark's vLLM integration. Supported activation dtypes are dict_keys(['mxfp4', 'mxfp6_e3m2', "
            "'mxfp6_e2m3', 'mxfp8_e4m3']), or None for weight-only quantization.";
    return std::nullopt;
  }
  return true;
}

/// Quark's INT schemes (W8A8 INT8, W4A16 INT4/UINT4), which this build does not read.
bool int_weights(const json::value* w) {
  const auto* dtype = field(w, "dtype");
  return dtype && dtype->is_string() && (dtype->get_string().starts_with("int") || dtype->get_string().starts_with("uint"));
}

std::string spec_words(const json::value* w, const json::value* in) {
  auto one = [](const json::value* s) {
    if (!s || !s->is_object()) return std::string("bf16");
    std::string out;
    for (const char* key : {"dtype", "qscheme"})
      if (const auto* v = field(s, key); v && v->is_string()) out += (out.empty() ? "" : " ") + std::string(v->get_string());
    if (const auto* g = field(s, "group_size"); g && integer(*g)) out += " " + std::to_string(*integer(*g));
    if (truthy_field(s, "is_dynamic")) out += " dynamic";
    return out;
  };
  return "Quark " + one(w) + " weights, " + one(in) + " activations";
}

/// The sizes of a Quark config's specs, which the scale shapes are divided by: a `block_size` of two positive
/// ints and a positive `group_size` (or null), refused naming the field otherwise.
void check_spec_sizes(const json::value& config, const std::string& where) {
  if (!config.is_object()) return;
  for (const char* key : {"weight", "input_tensors", "output_tensors"}) {
    const auto* v = config.get_object().if_contains(key);
    if (!v) continue;
    std::vector<const json::value*> specs{v};
    if (v->is_array()) {
      specs.clear();
      for (const auto& e : v->get_array()) specs.push_back(&e);
    }
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const auto at = where + "." + key + (v->is_array() ? "[" + std::to_string(i) + "]" : "");
      if (const auto* b = field(specs[i], "block_size"); b && !b->is_null()) {
        const bool ok = b->is_array() && b->get_array().size() == 2 &&
                        std::all_of(b->get_array().begin(), b->get_array().end(), [](const json::value& d) { return integer(d).value_or(0) > 0; });
        if (!ok) refuse(at + ".block_size", *b, "two positive integers [rows, cols]");
      }
      if (const auto* g = field(specs[i], "group_size"); g && !g->is_null() && integer(*g).value_or(0) <= 0)
        refuse(at + ".group_size", *g, "a positive group size, or null");
    }
  }
}

/// What vLLM builds from one Quark layer config for a linear layer and for the experts.
quark_layer_config evaluate(const std::string& pattern, const json::value& config, const std::string& where, bool output_cleared) {
  quark_layer_config out;
  out.pattern = pattern;
  out.canonical = canonical_json(config);
  if (!config.is_object()) {
    // vLLM calls .get on it; any other value fails there.
    out.linear.error = out.moe.error = where + " is " + quoted(config) + "; expected an object of Quark quantization specs";
    return out;
  }
  const auto* output = field(&config, "output_tensors");
  if ((output && !output_cleared && truthy(*output)) || (field(&config, "bias") && truthy(*field(&config, "bias")))) {
    out.linear.error = out.moe.error = "Currently, Quark models with output_tensors and bias quantized are not supported";
    return out;
  }
  const auto weight = unwrap(field(&config, "weight")), input = unwrap(field(&config, "input_tensors"));
  if (weight.multi || input.multi) {
    out.linear.error = out.moe.error = where + " has a multi-entry weight or input spec (Quark's NVFP4 or W4A8), which this build does not read";
    return out;
  }
  const auto* w = weight.spec;
  const auto* in = input.spec;
  const auto words = spec_words(w, in);
  const auto not_read = [&](std::string_view what) { return where + " is " + words + " (" + std::string(what) + "), which this build does not read"; };
  // A linear layer (_get_scheme_cls_from_config).
  if (equals(field(w, "qscheme"), "per_block") && !(field(w, "block_size") && truthy(*field(w, "block_size")))) {
    out.linear.error = "Quark W8A8 FP8 per-block weight quantization requires `block_size` in the weight quantization config.";
  } else if (const auto fp8 = fp8_w8a8(w, in)) {
    out.linear = {method_class::quark_linear, words, *fp8, std::nullopt};
  } else if (int_weights(w)) {
    out.linear.error = not_read("INT weights");
  } else if (const auto mx = ocp_mx_dtype(w); !mx.empty()) {
    std::string error;
    const auto ok = ocp_mx_input(in, false, error, where);
    if (!ok) out.linear.error = error;
    else if (!*ok) out.linear.error = "No quark compatible scheme was found. Weight config: " + py_value_repr(*w) +
                                      ", Input config: " + (in ? py_value_repr(*in) : std::string("None"));
    else if (in && equals(field(in, "dtype"), "fp8_e4m3") && !truthy_field(in, "is_dynamic")) out.linear.error = not_read("MXFP4 with FP8");
    else out.linear = {method_class::quark_linear, words, mx == "mxfp4" ? stored_layout::mxfp4 : mx == "mxfp8_e4m3" ? stored_layout::mxfp8 : stored_layout::unknown,
                       std::nullopt};
  } else {
    out.linear.error = "No quark compatible scheme was found. Weight config: " + (w ? py_value_repr(*w) : std::string("None")) +
                       ", Input config: " + (in ? py_value_repr(*in) : std::string("None"));
  }
  // The experts (QuarkMoEMethod.get_moe_method_target).
  const auto mx = ocp_mx_dtype(w);
  std::string error;
  if (const auto fp8 = fp8_w8a8(w, in)) {
    out.moe = {method_class::quark_fp8_moe, words, *fp8, std::nullopt};
  } else if (int_weights(w)) {
    out.moe.error = not_read("INT experts");
  } else if (const auto ok = mx.empty() ? std::optional<bool>(false) : ocp_mx_input(in, true, error, where); !ok) {
    out.moe.error = error;
  } else if (*ok && mx.starts_with("mxfp8_e4m3")) {
    out.moe.error = not_read("MXFP8 experts, QuarkW8A8Mxfp8MoEMethod");
  } else if (*ok) {
    out.moe = {method_class::quark_ocp_mx_moe, words, mx == "mxfp4" ? stored_layout::mxfp4 : stored_layout::unknown, std::nullopt};
  } else {
    out.moe.error = "Unsupported FusedMoe scheme";
  }
  return out;
}

/// `export.kv_cache_group`: vLLM requires the KV-cache layers' configs in layer_quant_config, all with one
/// output spec, which it then clears (and *q_proj's); returns the patterns whose output spec is cleared.
std::set<std::string> kv_cache_patterns(const json::object& config, const json::object& layers) {
  const auto& exp = config.at("export").get_object();
  const auto* group = exp.if_contains("kv_cache_group");
  if (!group || !group->is_array()) refuse("quantization_config.export.kv_cache_group", group ? *group : json::value(nullptr), "a list of KV-cache layer patterns ([] for none)");
  std::vector<std::string> kv;
  for (const auto& e : group->get_array()) {
    if (!e.is_string()) throw config_error("", "quantization_config.export.kv_cache_group holds " + quoted(e) + "; expected layer patterns (strings)");
    kv.emplace_back(e.get_string());
  }
  std::set<std::string> cleared;
  if (kv.empty()) return cleared;
  auto fnmatch = [](std::string_view name, std::string_view pattern) { return fnmatch_case(pattern, name); };
  bool subset = true, any = false;
  for (const auto& p : kv) subset = subset && layers.contains(p);
  for (const auto& [name, c] : layers)
    for (const auto& p : kv) any = any || fnmatch(name, p);
  if (!subset && !any)
    throw config_error("", "The Quark quantized model has the kv_cache_group parameter setting, but no kv_cache quantization settings were found in "
                           "the quantization configuration.");
  std::optional<std::string> first;
  for (const auto& entry : layers) {
    const std::string_view name = entry.key();
    const auto& c = entry.value();
    if (!std::any_of(kv.begin(), kv.end(), [&](const auto& p) { return fnmatch(name, p); })) continue;
    const auto* out = c.is_object() ? c.get_object().if_contains("output_tensors") : nullptr;
    const auto text = out ? canonical_json(*out) : std::string("null");
    if (!first) first = text;
    else if (*first != text)
      throw config_error("", "The quantization method used for kv_cache should be the same, but the quantization method for the kv_cache layer in "
                             "the config is different.");
    cleared.insert(std::string(name));
  }
  if (!first || *first == "null") throw config_error("", "The kv_cache quantization configuration is empty.");
  cleared.insert("*q_proj");
  return cleared;
}

}  // namespace

void read_quark(const json::object& o, checkpoint_source& s) {
  const std::string where = "quantization_config";
  s.method = checkpoint_method::quark;
  const auto* exp = o.if_contains("export");
  if (!exp || exp->is_null()) throw config_error("", "The export key should be included in the configurations of Quark quantized model");
  if (!exp->is_object()) refuse(where + ".export", *exp, "an object (Quark's export settings)");
  const auto* layers_v = o.if_contains("layer_quant_config");
  if (layers_v && !layers_v->is_null() && !layers_v->is_object()) refuse(where + ".layer_quant_config", *layers_v, "an object of layer pattern -> config");
  const json::object none;
  const auto& layers = layers_v && layers_v->is_object() ? layers_v->get_object() : none;
  const auto cleared = kv_cache_patterns(o, layers);
  if (const auto* pack = exp->get_object().if_contains("pack_method"); pack && !pack->is_null() && !pack->is_string())
    refuse(where + ".export.pack_method", *pack, "a packing name such as 'reorder'");
  // vLLM iterates `exclude` for every layer and calls .get on the two fallback configs.
  const auto* exclude = o.if_contains("exclude");
  if (!exclude || !exclude->is_array()) refuse(where + ".exclude", exclude ? *exclude : json::value(nullptr), "a list of module names ([] for none)");
  s.skipped = string_list(o, "exclude", where);
  s.skipped_key = "exclude";
  for (const char* key : {"layer_type_quant_config", "global_quant_config"}) {
    const auto* v = o.if_contains(key);
    if (!v || !v->is_object()) refuse(where + "." + key, v ? *v : json::value(nullptr), "an object");
  }
  for (const auto& [name, config] : layers) check_spec_sizes(config, where + ".layer_quant_config[" + text::py_repr(std::string_view(name)) + "]");
  check_spec_sizes(o.at("global_quant_config"), where + ".global_quant_config");
  for (const auto& [name, config] : layers)
    s.quark_layers.push_back(evaluate(std::string(name), config, where + ".layer_quant_config[" + text::py_repr(std::string_view(name)) + "]",
                                      cleared.count(std::string(name)) != 0));
  // layer_type_quant_config is keyed by the layer's Python class, which no JSON key equals: the global
  // config is every unnamed layer's.
  s.quark_global = evaluate("", o.at("global_quant_config"), where + ".global_quant_config", false);
}

void read_modelopt_mixed(const json::object& from, const std::string& where, checkpoint_source& s) {
  const auto field_name = where + ".quantized_layers";
  const auto* layers = from.if_contains("quantized_layers");
  if (layers && !layers->is_null() && !layers->is_object()) refuse(field_name, *layers, "an object of module -> {\"quant_algo\": ...}");
  if (!layers || layers->is_null() || layers->get_object().empty())
    throw config_error("", "MIXED_PRECISION quant_algo requires a non-empty 'quantized_layers' mapping in the quantization config.");
  std::optional<std::int64_t> nvfp4_group;
  std::set<std::int64_t> block_groups;
  for (const auto& [name, entry] : layers->get_object()) {
    const auto at = field_name + "[" + text::py_repr(std::string_view(name)) + "]";
    if (!entry.is_object()) refuse(at, entry, "an object with the module's quant_algo");
    const auto& e = entry.get_object();
    const auto* algo = e.if_contains("quant_algo");
    if (!algo || !algo->is_string()) refuse(at + ".quant_algo", algo ? *algo : json::value(nullptr), "a ModelOpt algo name such as 'NVFP4'");
    auto upper = std::string(algo->get_string());
    for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (upper == "IQ2_XS" || upper == "IQ2_XXS" || upper == "Q8_0")
      throw config_error("", at + ".quant_algo is " + quoted(*algo) + ", a ggml block codec this build does not read");
    if (const auto* enc = e.if_contains("weight_scale_encoding"); enc && !enc->is_null())
      throw config_error("", at + ".weight_scale_encoding is " + quoted(*enc) + ", a scale encoding this build does not read");
    const auto* gs = e.if_contains("group_size");
    if ((upper == "NVFP4" || upper == "W4A16_NVFP4") && !nvfp4_group) {
      // _from_config takes the first NVFP4 entry's group_size as it is (16 when absent).
      nvfp4_group = 16;
      if (gs && !gs->is_null()) {
        const auto g = integer(*gs);
        if (!g || *g <= 0) refuse(at + ".group_size", *gs, "a positive number of weights per NVFP4 scale (16)");
        nvfp4_group = *g;
      }
    }
    if (upper == "FP8_PB_WO" || upper == "FP8_BLOCK_SCALES") {
      // int(layer_info.get("group_size", 128)) for every block-FP8 entry.
      std::int64_t g = 128;
      if (gs && !gs->is_null()) {
        const auto i = python_int(*gs);
        if (!i || *i <= 0) refuse(at + ".group_size", *gs, "a positive block size (128)");
        g = *i;
      }
      block_groups.insert(g);
    }
    s.quantized_layers.emplace_back(std::string(name), upper);
  }
  if (block_groups.size() > 1) {
    std::string sizes;
    for (const auto g : block_groups) sizes += (sizes.empty() ? "" : ", ") + std::to_string(g);
    throw config_error("", "MIXED_PRECISION currently requires all block-FP8 MoE layers to use one group_size, got [" + sizes + "].");
  }
  if (nvfp4_group) s.group_size = *nvfp4_group;
}

}  // namespace qpolicy::source::detail
