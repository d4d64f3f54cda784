// The checkpoint formats (checkpoint_format.hpp): what each can express, and its quantization_config.
#include "checkpoint_format.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <set>
#include <tuple>

#include "qpolicy/config/config.hpp"
#include "qpolicy/model/module_order.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy {

std::string_view to_string(checkpoint_format f) {
  constexpr std::string_view names[] = {"automatic", "vllm-fp8", "compressed-tensors", "quark", "modelopt"};
  return names[static_cast<std::size_t>(f)];
}

namespace checkpoint_io {

std::optional<key_id> activation_of(const layer_plan& l, layer_kind kind) {
  switch (l.activation) {
    case activation_kind::method_default: return schemes::default_activation(l.decided, kind);
    case activation_kind::none: return std::nullopt;
    case activation_kind::key: return l.activation_key;
  }
  return std::nullopt;
}

namespace {

namespace json = boost::json;

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

/// compressed-tensors' QuantizationArgs: symmetric, the type, bits, strategy and block/group fields of
/// the layout, keys sorted as transformers writes config.json.
struct args_of {
  int num_bits = 8;
  std::string_view type = "float", strategy;
  bool dynamic = false;
  std::optional<std::int64_t> group_size;
  bool blocks = false;
  std::string_view scale_dtype;  // "" for null
};
/// An FP8 tensor's arguments (no scale dtype: float32 scales).
args_of fp8_args(std::string_view strategy, bool dynamic, std::optional<std::int64_t> group_size = std::nullopt, bool blocks = false) {
  return {8, "float", strategy, dynamic, group_size, blocks, ""};
}

json::object quant_args(const args_of& x) {
  json::object a;
  a["actorder"] = nullptr;
  a["block_structure"] = x.blocks ? json::value(json::array{schemes::block_k, schemes::block_k}) : json::value(nullptr);
  a["dynamic"] = x.dynamic;
  a["group_size"] = x.group_size ? json::value(*x.group_size) : json::value(nullptr);
  a["num_bits"] = x.num_bits;
  a["observer"] = x.dynamic ? json::value(nullptr) : json::value("memoryless_minmax");
  a["observer_kwargs"] = json::object{};
  a["scale_dtype"] = x.scale_dtype.empty() ? json::value(nullptr) : json::value(x.scale_dtype);
  a["strategy"] = x.strategy;
  a["symmetric"] = true;
  a["type"] = x.type;
  a["zp_dtype"] = nullptr;
  return a;
}

/// How compressed-tensors 0.19 stores a low-precision formula's weights (read from what llm-compressor
/// 0.14 writes for the MXFP8, MXFP4A16, NVFP4A16 presets and an 8-bit channel INT scheme).
struct block_layout {
  schemes::formula formula;
  std::string_view format;       // the config group's format
  std::string_view codes;        // the codes' tensor suffix
  std::string_view second;       // the third tensor's suffix, if any
  args_of weights;
};
constexpr block_layout block_layouts[] = {
    {schemes::formula::mxfp8_torch, "mxfp8-quantized", "weight", "", {8, "float", "group", false, 32, false, "torch.uint8"}},
    {schemes::formula::mxfp4_even, "mxfp4-pack-quantized", "weight_packed", "", {4, "float", "group", false, 32, false, "torch.uint8"}},
    {schemes::formula::nvfp4_weight, "nvfp4-pack-quantized", "weight_packed", "weight_global_scale",
     {4, "float", "tensor_group", false, 16, false, "torch.float8_e4m3fn"}},
    // 8-bit INT weights packed four to an int32 (offset by 128), the shape beside them.
    {schemes::formula::int8_per_channel, "pack-quantized", "weight_packed", "weight_shape",
     {8, "int", "channel", false, std::nullopt, false, ""}},
};
const block_layout& layout_of(schemes::formula f) {
  // A rotating formula stores its base's codes and scales (the rotation travels as transform_config).
  const auto stored = schemes::formula_of(f).base;
  for (const auto& l : block_layouts)
    if (l.formula == stored) return l;
  throw std::logic_error("no checkpoint layout for formula " + std::string(schemes::formula_of(f).name));
}

/// The compressed-tensors format and weight arguments of a quantizing method.
std::pair<std::string_view, json::object> weight_args(method m) {
  if (const auto f = schemes::weight_formula_of(m)) {
    const auto& l = layout_of(*f);
    return {l.format, quant_args(l.weights)};
  }
  switch (*schemes::contract_of(m).scales) {
    case fp8::weight_scales::per_tensor: return {"float-quantized", quant_args(fp8_args("tensor", false))};
    case fp8::weight_scales::per_channel: return {"float-quantized", quant_args(fp8_args("channel", false))};
    case fp8::weight_scales::block_128x128: return {"float-quantized", quant_args(fp8_args("block", false, std::nullopt, true))};
  }
  return {};
}

/// The input_activations arguments of activation key `k` for method `m`'s weights (null: none), or
/// nullopt where a checkpoint cannot express the pair: FP8 weights take dynamic FP8 activations, the
/// MX schemes their own dynamic MX activations.
std::optional<json::value> activation_args(method m, std::optional<key_id> k) {
  if (!k) return json::value(nullptr);
  if (schemes::weight_formula_of(m)) {
    if (k != schemes::default_activation(m, layer_kind::linear) && k != schemes::default_activation(m, layer_kind::moe))
      return std::nullopt;
    const bool mxfp4 = m == method::mxfp4;
    if (!mxfp4 && m != method::mxfp8) return std::nullopt;
    return json::value(quant_args({mxfp4 ? 4 : 8, "float", "group", true, 32, false, "torch.uint8"}));
  }
  const auto& key = key_of(*k);
  if (key.data != dtype::f8e4m3fn || key.scale.is_static) return std::nullopt;
  if (key.scale.group == per_tensor) return json::value(quant_args(fp8_args("tensor", true)));
  if (key.scale.group == per_token) return json::value(quant_args(fp8_args("token", true)));
  if (key.scale.group.row == 1 && key.scale.group.col > 0)
    return json::value(quant_args(fp8_args("group", true, key.scale.group.col)));
  return std::nullopt;
}

std::string activation_text(std::optional<key_id> k) { return k ? key_name(*k, newest_release) : std::string("none (weight-only)"); }

}  // namespace

std::vector<std::string> unquantized_modules_if(const model_desc& model, const std::function<bool(std::size_t)>& unquantized,
                                                bool moe_as_pattern) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& layer = model.layers[i];
    if (!unquantized(i)) continue;
    // Embeddings are no linear module; the LM head is one in transformers (nn.Linear).
    if (layer.kind == layer_kind::other && layer.class_name != "ParallelLMHead") continue;
    add_module_names(model, layer, moe_as_pattern, out);
  }
  return out;
}

std::vector<std::string> unquantized_modules(const model_desc& model, const plan& p, bool moe_as_pattern) {
  return unquantized_modules_if(model, [&](std::size_t i) { return !p.layers[i].quantized(); }, moe_as_pattern);
}

std::vector<std::string> layer_module_names(const model_desc& model, const layer_desc& layer, bool moe_as_pattern) {
  std::vector<std::string> out;
  add_module_names(model, layer, moe_as_pattern, out);
  return out;
}

json::object fp8_quant_args(std::string_view strategy, bool dynamic, std::optional<std::int64_t> group_size,
                            std::optional<std::array<std::int64_t, 2>> block) {
  auto a = quant_args(fp8_args(strategy, dynamic, group_size, block.has_value()));
  if (block) a["block_structure"] = json::array{(*block)[0], (*block)[1]};
  return a;
}

namespace {

/// A transform's TransformArgs, keys sorted as transformers writes config.json.
json::object transform_args(const rotation_group& g, std::string_view location, bool inverse, const json::array& ignore) {
  json::array targets;
  if (g.every_quantized) targets.emplace_back("Linear");
  else
    for (const auto& m : g.modules) targets.emplace_back(m);
  return {{"ignore", g.every_quantized ? ignore : json::array{}}, {"inverse", inverse}, {"location", location}, {"targets", targets}};
}

}  // namespace

std::vector<rotation_group> rotation_groups(const model_desc& model, const plan& p) {
  std::vector<rotation_group> groups;
  std::size_t quantized = 0, rotated = 0;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& l = p.layers[i];
    quantized += l.quantized();
    if (!l.quantized() || !l.hadamard) continue;
    ++rotated;
    const auto size = hadamard_size_of(l);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const rotation_group& g) { return g.size == size; });
    if (it == groups.end()) it = groups.insert(groups.end(), rotation_group{"", size, {}, false});
    add_module_names(model, model.layers[i], false, it->modules);
  }
  for (auto& g : groups) std::sort(g.modules.begin(), g.modules.end(), [](const std::string& a, const std::string& b) { return module_order_less(a, b); });
  std::sort(groups.begin(), groups.end(),
            [](const rotation_group& a, const rotation_group& b) { return module_order_less(a.modules.front(), b.modules.front()); });
  // llm-compressor's QuIPModifier names its input rotation "v"; several sizes are several schemes.
  for (auto& g : groups) {
    g.scheme = "v";
    if (groups.size() > 1) g.scheme.append(std::to_string(g.size));  // not "v" + string: GCC 12's false -Wrestrict
  }
  if (groups.size() == 1) groups.front().every_quantized = rotated == quantized;
  return groups;
}

std::string transform_tensor_name(const rotation_group& g) { return g.modules.front() + "." + g.scheme + "_input.weight"; }

json::object transform_config(const model_desc& model, const plan& p) {
  const auto groups = rotation_groups(model, p);
  if (groups.empty()) return {};
  json::array ignore;
  for (const auto& name : unquantized_modules(model, p, true)) ignore.emplace_back(name);
  json::object schemes;
  for (const auto& g : groups)
    schemes[g.scheme] = json::object{
        {"apply", json::array{transform_args(g, "input", false, ignore), transform_args(g, "weight_input", true, ignore)}},
        {"head_dim", g.size},
        // The rotation qpolicy applies to the weights and vLLM 0.34 to the activations (new-schemes-numerics.md A.3).
        {"precision", "torch.float32"},
        {"randomize", false},
        {"requires_grad", false},
        {"type", "hadamard"}};
  return {{"config_groups", schemes}};
}

checkpoint_format choose_format(checkpoint_format requested, const model_desc& model, const plan& p,
                                std::vector<std::string>& warnings) {
  std::set<method> methods;
  for (const auto& l : p.layers)
    if (l.quantized()) methods.insert(l.decided);
  if (requested == checkpoint_format::automatic) {
    // vllm-fp8 where it expresses the plan: one 128x128-block scheme with the activations it picks.
    bool blocks = methods.size() == 1 && schemes::contract_of(*methods.begin()).scales == fp8::weight_scales::block_128x128;
    for (std::size_t i = 0; blocks && i < model.layers.size(); ++i)
      blocks = !p.layers[i].quantized() ||
               activation_of(p.layers[i], model.layers[i].kind) == schemes::default_activation(p.layers[i].decided, model.layers[i].kind);
    requested = blocks ? checkpoint_format::vllm_fp8 : checkpoint_format::compressed_tensors;
  }
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& l = p.layers[i];
    const bool low_precision = l.quantized() && schemes::is_weight_only(l.decided);
    // The writer refuses the others by name.
    if (!l.quantized() || !schemes::has_kernels(l.decided)) continue;
    const auto& layer = model.layers[i];
    const auto activation = activation_of(l, layer.kind);
    const auto method_name = std::string(to_string(l.decided));
    if (requested == checkpoint_format::vllm_fp8) {
      if (low_precision)
        throw config_error("", "layer " + layer.name + " is planned as " + method_name +
                                   ", which --format vllm-fp8 cannot express (vLLM's fp8 checkpoint method holds FP8 weights with "
                                   "float32 scales); --format compressed-tensors can (" +
                                   std::string(layout_of(*schemes::weight_formula_of(l.decided)).format) + ")");
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
    } else if (requested == checkpoint_format::modelopt) {
      if (!modelopt_algo(l.decided, layer.kind, activation))
        throw config_error("", "layer " + layer.name + " is planned as " + method_name + " with " + activation_text(activation) +
                                   " activations, which the ModelOpt MIXED_PRECISION checkpoint that keeps the NVFP4 layers does not hold "
                                   "(qpolicy writes linear layers there: " + modelopt_algos_text() + ")");
    } else if (requested == checkpoint_format::quark) {
      if (!quark_expresses(l.decided, activation))
        throw config_error("", "layer " + layer.name + " is planned as " + method_name + " with " + activation_text(activation) +
                                   " activations, which the Quark checkpoint that keeps gpt-oss's MXFP4 experts does not hold "
                                   "(qpolicy writes Quark's FP8 layouts there: fp8_per_tensor, fp8_per_channel and fp8_per_block "
                                   "with their dynamic activations)");
    } else if (!activation_args(l.decided, activation)) {
      throw config_error("", "layer " + layer.name + " is planned with " + activation_text(activation) + " activations, which a " +
                                 "checkpoint cannot express" +
                                 (low_precision ? " with " + method_name + " weights (compressed-tensors pairs them with " +
                                                      activation_text(schemes::default_activation(l.decided, layer.kind)) +
                                                      " activations or none)"
                                                : std::string(": a static activation scale comes from calibration, which online "
                                                              "quantization does not run")));
    }
  }
  if (requested == checkpoint_format::compressed_tensors && methods.count(method::nvfp4_per_token))
    warnings.push_back("nvfp4_per_token: compressed-tensors has no per-token NVFP4 activations; the checkpoint holds the NVFP4 "
                       "weights (nvfp4-pack-quantized, as NVFP4A16), which a loader runs without activation quantization");
  if (requested == checkpoint_format::vllm_fp8 && methods.size() == 1 &&
      schemes::contract_of(*methods.begin()).scales == fp8::weight_scales::per_tensor)  // (automatic never picks it)
    warnings.push_back("--format vllm-fp8 with " + std::string(to_string(*methods.begin())) +
                       ": vLLM loads it, but transformers' fp8 method reads only 128x128 blocks and would ignore the "
                       "weight_scale tensors (a scale of 1); --format compressed-tensors loads correctly in both");
  return requested;
}

std::vector<stored_tensor> low_precision_tensors(schemes::formula f, safetensors::dtype d, std::int64_t rows, std::int64_t cols) {
  using st = safetensors::dtype;
  const auto& l = layout_of(f);
  const auto& formula = schemes::formula_of(f);
  const auto scale_shape = schemes::block_scale_shape(formula, rows, cols, false);
  std::vector<stored_tensor> out;
  switch (formula.codes) {
    case schemes::code_format::e4m3: out.push_back({l.codes, st::F8_E4M3, {rows, cols}}); break;
    case schemes::code_format::e2m1_packed: out.push_back({l.codes, st::U8, {rows, cols / 2}}); break;
    case schemes::code_format::int8: out.push_back({l.codes, st::I32, {rows, (cols + 3) / 4}}); break;
    case schemes::code_format::lut3_tiles:  // prepare_conversion refuses LUT-B before any tensor is planned
      throw std::logic_error("LUT-B has no checkpoint format (no loader reads its tiles)");
  }
  // Block scales are bytes (E8M0 or e4m3); the INT8 row scale is a model-dtype value, stored as one.
  const st scale_type = formula.scales == schemes::scale_format::e8m0 ? st::U8 : formula.scales == schemes::scale_format::e4m3 ? st::F8_E4M3 : d;
  out.push_back({"weight_scale", scale_type, {scale_shape[0], scale_shape[1]}});
  if (formula.second == schemes::second_scale::per_tensor) out.push_back({l.second, st::F32, {1}});
  if (formula.codes == schemes::code_format::int8) out.push_back({l.second, st::I64, {2}});
  return out;
}

std::string_view scale_suffix(checkpoint_format f, method m) {
  return f == checkpoint_format::vllm_fp8 ? schemes::contract_of(m).checkpoint_scale : std::string_view("weight_scale");
}

scale_spelling scale_spelling_of(checkpoint_format f, method m) {
  const auto scales = schemes::contract_of(m).scales;
  if ((f == checkpoint_format::quark || f == checkpoint_format::modelopt) && scales == fp8::weight_scales::per_channel)
    return scale_spelling::rows_1d;
  if (f == checkpoint_format::modelopt && scales == fp8::weight_scales::block_128x128) return scale_spelling::blocks_4d;
  return scale_spelling::grid;
}

namespace {

/// One config group per (weight layout, activation) pair of the layers `p` quantizes, in the order the
/// model first uses them. One group alone targets every linear module where `linear_target` (as
/// llm-compressor writes it; vLLM maps Linear onto its fused MoE layers too); else each names its modules.
std::vector<json::object> online_groups(const model_desc& model, const plan& p, bool linear_target) {
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
  std::vector<json::object> out;
  for (const auto& [m, activation, modules] : groups) {
    json::object group;
    auto [format, weights] = weight_args(m);
    group["format"] = format;
    group["input_activations"] = *activation_args(m, activation);
    group["output_activations"] = nullptr;
    json::array targets;
    if (linear_target && groups.size() == 1) targets.emplace_back("Linear");
    else
      for (const auto& name : modules) targets.emplace_back(name);
    group["targets"] = targets;
    group["weights"] = std::move(weights);
    out.push_back(std::move(group));
  }
  return out;
}

/// A compressed-tensors quantization_config from its parts.
json::object ct_config(json::object config_groups, const std::set<std::string>& formats, json::array ignore, json::object transforms,
                       json::value kv_cache_scheme) {
  return json::object{{"config_groups", std::move(config_groups)},
                      // compressed-tensors' _flatten_formats: one format, or mixed-precision.
                      {"format", formats.size() == 1 ? *formats.begin() : std::string("mixed-precision")},
                      {"global_compression_ratio", nullptr},
                      {"ignore", std::move(ignore)},
                      {"kv_cache_scheme", std::move(kv_cache_scheme)},
                      {"quant_method", "compressed-tensors"},
                      {"quantization_status", "compressed"},
                      {"sparsity_config", json::object{}},
                      {"transform_config", std::move(transforms)},
                      {"version", "0.19.0"}};
}

}  // namespace

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
  json::object config_groups;
  std::set<std::string> formats;
  const auto groups = online_groups(model, p, true);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    formats.insert(std::string(groups[g].at("format").as_string()));
    config_groups["group_" + std::to_string(g)] = groups[g];
  }
  json::array ignore;
  for (const auto& name : unquantized_modules(model, p, true)) ignore.emplace_back(name);
  return ct_config(std::move(config_groups), formats, std::move(ignore), transform_config(model, p), nullptr);
}

json::object mixed_quantization_config(const model_desc& model, const plan& online, const std::vector<std::pair<std::string, json::object>>& kept,
                                       const std::function<bool(std::size_t)>& unquantized, const json::object& checkpoint_config) {
  json::object config_groups;
  std::set<std::string> formats;
  auto add = [&](const std::string& name, const json::object& group) {
    if (const auto* f = group.if_contains("format"); f && f->is_string()) formats.insert(std::string(f->get_string()));
    else if (const auto* f = checkpoint_config.if_contains("format"); f && f->is_string()) formats.insert(std::string(f->get_string()));
    config_groups[name] = group;
  };
  for (const auto& [name, group] : kept) add(name, group);
  const auto groups = online_groups(model, online, false);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    auto name = "group_" + std::to_string(g);
    if (config_groups.contains(name)) name.insert(0, "online_");
    add(name, groups[g]);
  }
  json::array ignore;
  for (const auto& name : unquantized_modules_if(model, unquantized, true)) ignore.emplace_back(name);
  const auto* kv = checkpoint_config.if_contains("kv_cache_scheme");
  // The checkpoint's own rotations stay as it wrote them (the online plan then rotates nothing).
  auto transforms = transform_config(model, online);
  if (const auto* t = checkpoint_config.if_contains("transform_config"); t && t->is_object() && !t->get_object().empty())
    transforms = t->get_object();
  return ct_config(std::move(config_groups), formats, std::move(ignore), std::move(transforms), kv ? *kv : json::value(nullptr));
}

}  // namespace checkpoint_io

}  // namespace qpolicy
