// `qpolicy quantize`: plan, map checkpoint tensors to the plan's layers, quantize unit by unit
// (a weight, a fused layer's shards, an expert's gate/up/down), stream everything into one output.
#include "qpolicy/io/checkpoint.hpp"
#include "qpolicy/kernels/cuda/availability.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "../json/json_text.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/model/module_order.hpp"
#include "qpolicy/io/detail/paths.hpp"
#include "qpolicy/io/model_dir_plan.hpp"
#include "qpolicy/io/safetensors.hpp"
#include "checkpoint_files.hpp"
#include "checkpoint_format.hpp"
#include "checkpoint_stages.hpp"
#include "qpolicy/io/detail/staged_output.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy {

namespace {

namespace fs = std::filesystem;
namespace st = safetensors;
using namespace checkpoint_io;
using json_text::sv;

/// The parts of an expert weight's name, `L.N.P.weight` with L ending in ".experts", N digits and P
/// one of gate_proj/up_proj/down_proj/w1/w2/w3. A hand-written split rather than std::regex: linear in
/// the name's length and without regex recursion, which overflows the stack on long hostile names.
struct expert_weight {
  std::string_view layer, index, proj;
};
std::optional<expert_weight> split_expert_weight(std::string_view name) {
  constexpr std::string_view suffix = ".weight";
  if (!name.ends_with(suffix)) return std::nullopt;
  const auto base = name.substr(0, name.size() - suffix.size());
  const auto proj_dot = base.rfind('.');
  if (proj_dot == std::string_view::npos) return std::nullopt;
  const auto proj = base.substr(proj_dot + 1);
  constexpr std::string_view projs[] = {"gate_proj", "up_proj", "down_proj", "w1", "w2", "w3"};
  if (std::find(std::begin(projs), std::end(projs), proj) == std::end(projs)) return std::nullopt;
  const auto rest = base.substr(0, proj_dot);
  const auto index_dot = rest.rfind('.');
  if (index_dot == std::string_view::npos) return std::nullopt;
  const auto index = rest.substr(index_dot + 1), layer = rest.substr(0, index_dot);
  if (index.empty() || index.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  if (!layer.ends_with(".experts")) return std::nullopt;
  return expert_weight{layer, index, proj};
}

bool is_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

}  // namespace

model_desc derive_model(const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& weights,
                        std::string* convention) {
  model_desc m;
  m.name = "derived from the checkpoint";
  m.packed = {{"qkv_proj", {"q_proj", "k_proj", "v_proj"}}, {"gate_up_proj", {"gate_proj", "up_proj"}}};
  std::set<std::string> names;
  for (const auto& w : weights) names.insert(w.first);
  std::map<std::string, std::size_t> seen;  // layer name -> index in m.layers
  std::size_t experts_found = 0, fused_found = 0;
  auto add = [&](const std::string& name, const std::string& cls, layer_kind kind) -> layer_desc& {
    if (auto it = seen.find(name); it != seen.end()) return m.layers[it->second];
    seen[name] = m.layers.size();
    m.layers.push_back({name, cls, kind});
    return m.layers.back();
  };
  for (const auto& [name, shape] : weights) {
    if (shape.size() != 2 || !name.ends_with(".weight")) continue;
    if (const auto g = split_expert_weight(name)) {
      auto& l = add(std::string(g->layer), "FusedMoE", layer_kind::moe);
      // vLLM indexes experts with int32 (topk_ids); a larger index is no checkpoint it can load.
      const auto index = checked::parse_index(g->index, std::int64_t{1} << 31);
      if (!index)
        throw config_error("", "tensor " + text::py_repr(name) + " has expert index " + std::string(g->index) +
                                   "; expected an index from 0 to 2147483647");
      const auto e = *index + 1;
      l.num_experts = std::max<std::int64_t>(l.num_experts.value_or(0), e);
      const auto proj = g->proj;
      if (proj == "gate_proj" || proj == "w1") {
        l.intermediate_size = shape[0];
        l.hidden_size = shape[1];
      }
      ++experts_found;
      continue;
    }
    const auto base = name.substr(0, name.size() - 7);
    const auto dot = base.rfind('.');
    const auto last = dot == std::string::npos ? base : base.substr(dot + 1);
    const auto prefix = dot == std::string::npos ? std::string() : base.substr(0, dot + 1);
    bool fused = false;
    for (const auto& p : m.packed)
      if (std::find(p.shards.begin(), p.shards.end(), last) != p.shards.end()) {
        bool all = true;
        for (const auto& s : p.shards) all &= names.count(prefix + s + ".weight") > 0;
        if (!all) break;
        add(prefix + p.fused, p.fused == "qkv_proj" ? "QKVParallelLinear" : "MergedColumnParallelLinear", layer_kind::linear);
        fused = true;
        ++fused_found;
      }
    if (fused) continue;
    if (base.ends_with("embed_tokens")) add(base, "VocabParallelEmbedding", layer_kind::other);
    else if (base == "lm_head" || base.ends_with(".lm_head")) add(base, "ParallelLMHead", layer_kind::other);
    else if ((last == "gate" || last == "router") &&
             names.count(prefix + "experts.0.gate_proj.weight") + names.count(prefix + "experts.0.w1.weight"))
      add(base, "ReplicatedLinear", layer_kind::linear).quantizable = false;  // the router
    else add(base, "LinearBase", layer_kind::linear);
  }
  // Tensors are stored sorted by name; the layers go back into the order the model builds them.
  std::stable_sort(m.layers.begin(), m.layers.end(), [](const layer_desc& a, const layer_desc& b) { return module_order_less(a.name, b.name); });
  if (convention)
    *convention = "derived " + std::to_string(m.layers.size()) + " layers from the checkpoint's tensor names: " +
                  std::to_string(fused_found) + " fused shard tensors (qkv_proj, gate_up_proj), " +
                  std::to_string(experts_found) + " expert tensors (L.N.gate_proj/up_proj/down_proj or w1/w3/w2)";
  return m;
}

checkpoint_summary quantize_checkpoint(const checkpoint_request& req) {
  if (req.inputs.size() == 1 && is_directory(req.inputs.front())) return quantize_model_dir(req);
  if (req.max_shard_size)
    throw config_error("", "--max-shard-size applies to a model directory input and output; -o '" + req.output + "' is one file");
  const auto start = std::chrono::steady_clock::now();
  checkpoint_summary sum;
  std::vector<checkpoint_index> indexes;
  const auto files = checkpoint_files(req.inputs, indexes, sum.warnings);
  // Before any work: no output may be an input (or a file read for the config or model), another
  // output, or anything but a regular file.
  std::vector<role_path> read_paths, write_paths{{req.output, "-o"}};
  for (const auto& index : indexes) read_paths.push_back({index.path, "the checkpoint index"});
  for (const auto& f : files) read_paths.push_back({f, "the input"});
  for (const auto& f : req.also_read) read_paths.push_back(f);
  if (!req.config_out.empty()) write_paths.push_back({req.config_out, "--config-out"});
  check_run_paths(read_paths, write_paths);
  const auto ck = open_checkpoint(files, indexes);
  const auto c = prepare_conversion(ck, req, sum);
  // The checkpoint, then the config block (from the plan alone); both appear together.
  output_transaction outputs;
  st::writer out(outputs.stage(req.output), c.layout.specs, c.layout.metadata);
  tensor_streamer streamer(ck, c, req, sum);
  streamer.stream(0, ck.order.size(), out);
  out.finish();
  if (!req.config_out.empty())
    outputs.stage(req.config_out).write(json_text::serialize(conversion_config(c)) + "\n");
  outputs.commit();
  sum.notes = outputs.notes();
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sum;
}

namespace checkpoint_io {

conversion prepare_conversion(const checkpoint& ck, const checkpoint_request& req, checkpoint_summary& sum,
                              std::optional<quantized_input> input) {
  conversion c;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensors;
  for (const auto& t : ck.order) tensors.emplace_back(t.info->name, t.info->shape);
  if (input) {
    // The experts' projection names the checkpoint's rules match (Mixtral's w1/w3/w2, else gate/up/down).
    if (std::any_of(tensors.begin(), tensors.end(), [](const auto& t) { return t.first.find(".experts.0.w1.") != std::string::npos; }))
      input->source.expert_projections = {"w1", "w3", "w2"};
  }
  if (req.model) {
    c.model = *req.model;
    sum.convention = "layers from the model file";
  } else {
    c.model = derive_model(input ? source::weight_names_of(tensors, input->source) : tensors, &sum.convention);
  }
  c.decisions = make_plan(req.config, c.model);
  const auto& p = c.decisions;
  if (!p.configured)
    throw config_error("", "no online quantization is configured (the resolver returned None), so there is nothing to quantize");
  if (input) compose_with_checkpoint(ck, c, *input, req, sum);
  if (const auto* e = p.first_error()) throw config_error("", *e);
  sum.warnings.insert(sum.warnings.end(), p.warnings.begin(), p.warnings.end());
  c.format = sum.format = choose_format(input ? c.kept.format : req.format, c.model, p, sum.warnings);
  if (req.device == device_kind::cuda) cuda::require_cuda("quantize on the GPU (--device cuda)");
  c.units = plan_units(ck, c.model, p, c.format, c.input ? &*c.input : nullptr, c.composed ? &*c.composed : nullptr);
  for (const auto& [key, m] : c.units.members)
    if (m.stored)
      for (const auto& name : replaced_tensors(ck, *m.stored)) c.dropped.insert(name);
  for (const auto& g : rotation_groups(c.model, p))
    sum.rotations.push_back("Hadamard " + std::to_string(g.size) + " on the input of " + std::to_string(g.modules.size()) +
                            " modules (transform_config scheme '" + g.scheme + "', weight " + transform_tensor_name(g) +
                            "): their weights are stored rotated, and vLLM rotates their input online");
  c.layout = plan_output(ck, c.units, c.model, p, c.dropped, c.kept.renamed);
  return c;
}

void compose_with_checkpoint(const checkpoint& ck, conversion& c, quantized_input input, const checkpoint_request& req,
                             checkpoint_summary& sum) {
  const auto& s = input.source;
  // A transform_config is carried over as it is: it cannot also hold the online plan's rotations.
  if (s.has_transform_config && !rotation_groups(c.model, c.decisions).empty())
    throw config_error("", "the online plan rotates layers (a Hadamard size), and the checkpoint's compressed-tensors config has a "
                           "transform_config of its own; quantize does not merge two transform_configs");
  check_quantization_argument(s, req.quantization);
  if (req.format == checkpoint_format::vllm_fp8)
    throw config_error("", "--format vllm-fp8 cannot express an already-quantized checkpoint's layers beside the online ones (one fp8 "
                           "quantization_config describes one weight layout); --format compressed-tensors can (mixed-precision)");
  // Every module the checkpoint's method quantizes must be stored as its format says.
  check_stored_tensors(ck, s, c.model);
  auto composed = compose(c.decisions, c.model, s);
  // What vLLM refuses when it builds the model is refused here too; a layer whose requantization fails
  // only when vLLM loads the weights (the checkpoint method has no dequantize_weight) is one qpolicy
  // decodes itself: an extension, named.
  for (const auto& l : composed.layers)
    if (l.failed() && l.stage == error_stage::build) throw config_error("", *composed.first_error());
  // A rotated layer's stored weight is the rotated one: requantized without its transform it would be
  // wrong, and which modules a transform_config rotates is not read here.
  if (s.has_transform_config)
    for (std::size_t i = 0; i < composed.layers.size(); ++i)
      if (composed.layers[i].kind == composition::requantized)
        throw config_error("", "layer " + c.model.layers[i].name + " is planned for requantization, but the checkpoint's compressed-tensors "
                               "config has a transform_config (online rotations, whose rotated weights a requantization would have "
                               "to undo): quantize converts such a checkpoint only where its layers are kept");
  std::map<std::string, std::vector<std::string>> undecoded;  // vLLM's load error -> the layers
  for (std::size_t i = 0; i < composed.layers.size(); ++i)
    if (auto& l = composed.layers[i]; l.failed()) {
      undecoded[std::string(composed.error_of(l)) + "\x1f" + l.checkpoint.scheme].push_back(c.model.layers[i].name);
      l.extension = l.error;  // converted, as the warning and the plan say
      l.error = -1;
    }
  for (const auto& [key, layers] : undecoded) {
    const auto cut = key.find('\x1f');
    sum.warnings.push_back(fmt::format("vLLM {} would not requantize {} when loading this checkpoint ({}): qpolicy decodes {} itself (an "
                                       "extension), and the output stores the requantized weights, which vLLM loads directly",
                                       to_string(composed.online.release), text::py_repr_list(layers), key.substr(0, cut), key.substr(cut + 1)));
  }
  composed.summarize();
  sum.composition = composed.summary;
  if (!input.dtype_source.empty()) sum.notes.push_back("decoded weights take the model dtype, " + input.dtype_source);
  c.kept = keep_layers(ck, input, c.model, composed, req.format);
  sum.notes.insert(sum.notes.end(), c.kept.notes.begin(), c.kept.notes.end());
  c.composed = std::move(composed);
  c.input = std::move(input);
}

boost::json::object conversion_config(const conversion& c) {
  if (!c.composed) return quantization_config(c.format, c.model, c.decisions);
  const auto& layers = c.composed->layers;
  if (c.format == checkpoint_format::modelopt)
    return modelopt_mixed_quantization_config(
        c.model, c.decisions, c.kept.groups, [&](std::size_t i) { return layers[i].kind == composition::unquantized; }, c.input->config);
  if (c.format == checkpoint_format::quark)
    return quark_quantization_config(c.model, c.decisions, c.kept.groups,
                                     [&](std::size_t i) { return layers[i].kind == composition::unquantized; });
  return mixed_quantization_config(
      c.model, c.decisions, c.kept.groups, [&](std::size_t i) { return layers[i].kind == composition::unquantized; }, c.input->config);
}

std::string conversion_plan_json(const conversion& c) {
  return (c.composed ? composed_plan_to_json(*c.composed, c.model) : plan_to_json(c.decisions, c.model)) + "\n";
}

}  // namespace checkpoint_io

}  // namespace qpolicy
