// `qpolicy quantize`: plan, map checkpoint tensors to the plan's layers, quantize unit by unit
// (a weight, a fused layer's shards, an expert's gate/up/down), stream everything into one output.
#include "qpolicy/io/checkpoint.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "../json/json_text.hpp"
#include "qpolicy/core/checked.hpp"
#include "qpolicy/io/paths.hpp"
#include "qpolicy/io/safetensors.hpp"
#include "checkpoint_files.hpp"
#include "qpolicy/io/staged_output.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy {

namespace {

namespace fs = std::filesystem;
namespace st = safetensors;
using namespace checkpoint_io;
using json_text::sv;

bool is_float(st::dtype d) { return d == st::dtype::BF16 || d == st::dtype::F16 || d == st::dtype::F32; }

fp8::element element_of(st::dtype d) {
  return d == st::dtype::BF16 ? fp8::element::bf16 : d == st::dtype::F16 ? fp8::element::f16 : fp8::element::f32;
}

/// A 2-D weight as a kernel input (copied into `scratch` when the file holds it misaligned).
fp8::input_view view_of(const tensor_ref& t, std::vector<std::uint32_t>& scratch) {
  return aligned_input(t.file->data(*t.info), element_of(t.info->type), t.info->shape[0], t.info->shape[1], scratch);
}

/// One tensor to quantize: which layer, which formula, and under which scale name.
struct member {
  std::string tensor;  // "P.weight"
  key_id key = key_id::fp8_per_tensor_static;
  std::string_view scale_suffix;  // the scheme's scale tensor name: weight_scale or weight_scale_inv
  int joint = -1;       // members with the same joint id share one per-tensor scale (fused shards, gate/up)
};

struct unit_result {
  std::vector<std::uint8_t> codes;
  std::vector<float> scales;
  std::vector<std::int64_t> scale_shape;
};

std::string scale_name(const member& m) {
  const auto base = m.tensor.substr(0, m.tensor.size() - std::string(".weight").size());
  return base + "." + std::string(m.scale_suffix);
}

/// Refuses weights with NaN or infinity: their codes would be saturated garbage.
void check_finite(const tensor_ref& t) {
  std::vector<std::uint32_t> scratch;
  const auto x = view_of(t, scratch);
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < x.size(); ++i) bad += !std::isfinite(x.at(i));
  if (bad)
    throw config_error("", "tensor " + text::py_repr(t.info->name) + " holds " + std::to_string(bad) +
                               " NaN or infinite values; refusing to quantize it (its codes and scale would be meaningless)");
}

/// The quantization_config block for the model's config.json (cli.md), from the plan alone.
std::string quantization_config_json(const model_desc& model, const plan& p, std::vector<std::string>& warnings) {
  boost::json::object qc{{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}};
  std::set<method> methods;
  boost::json::array ignored;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& l = p.layers[i];
    if (l.quantized()) methods.insert(l.decided);
    else if (model.layers[i].kind != layer_kind::other) ignored.push_back(boost::json::string(model.layers[i].name));
  }
  for (auto m : methods)
    if (schemes::contract_of(m).scales == fp8::weight_scales::block_128x128) {
      qc["weight_block_size"] = boost::json::array{schemes::block_k, schemes::block_k};
      break;
    }
  if (methods.size() > 1)
    warnings.push_back("the plan mixes " + std::to_string(methods.size()) +
                       " schemes; one quantization_config block cannot describe that for vLLM's fp8 loader");
  if (!ignored.empty()) qc["ignored_layers"] = ignored;
  return boost::json::serialize(qc);
}

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
    else if (last == "gate" && names.count(prefix + "experts.0.gate_proj.weight") + names.count(prefix + "experts.0.w1.weight"))
      add(base, "ReplicatedLinear", layer_kind::linear).quantizable = false;  // the router
    else add(base, "LinearBase", layer_kind::linear);
  }
  if (convention)
    *convention = "derived " + std::to_string(m.layers.size()) + " layers from the checkpoint's tensor names: " +
                  std::to_string(fused_found) + " fused shard tensors (qkv_proj, gate_up_proj), " +
                  std::to_string(experts_found) + " expert tensors (L.N.gate_proj/up_proj/down_proj or w1/w3/w2)";
  return m;
}

checkpoint_summary quantize_checkpoint(const checkpoint_request& req) {
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
  model_desc model;
  if (req.model) {
    model = *req.model;
    sum.convention = "layers from the model file";
  } else {
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> weights;
    for (const auto& t : ck.order) weights.emplace_back(t.info->name, t.info->shape);
    model = derive_model(weights, &sum.convention);
  }
  const auto p = make_plan(req.config, model);
  if (!p.configured)
    throw config_error("", "no online quantization is configured (the resolver returned None), so there is nothing to quantize");
  if (const auto* e = p.first_error()) throw config_error("", *e);
  sum.warnings.insert(sum.warnings.end(), p.warnings.begin(), p.warnings.end());

  // Members of every quantized layer, with the formula each tensor gets.
  std::map<std::string, member> members;
  std::vector<std::vector<std::string>> joints;  // members sharing one per-tensor scale, by joint id
  int joint = 0;
  auto need = [&](const std::string& layer, const std::string& tensor) -> const tensor_ref& {
    const auto it = ck.by_name.find(tensor);
    if (it == ck.by_name.end())
      throw config_error("", "layer " + layer + " is planned for quantization, but the checkpoint has no tensor " + text::py_repr(tensor));
    const auto& t = it->second;
    if (t.info->shape.size() != 2 || !is_float(t.info->type))
      throw config_error("", "tensor " + text::py_repr(tensor) + " of layer " + layer + " is " +
                                 std::string(st::to_string(t.info->type)) + " " + checked::shape_text(t.info->shape) +
                                 "; quantize takes 2-D BF16, F16 or F32 weights");
    if (t.info->elements() == 0)
      throw config_error("", "tensor " + text::py_repr(tensor) + " of layer " + layer + " has shape " + checked::shape_text(t.info->shape) +
                                 " with no elements; there is no weight to quantize");
    return t;
  };
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& layer = model.layers[i];
    const auto& lp = p.layers[i];
    if (!lp.quantized()) continue;
    if (!schemes::has_kernels(lp.decided))
      throw config_error("", "layer " + layer.name + " is planned as " + std::string(to_string(lp.decided)) +
                                 ", but this build has no kernel for " + std::string(to_string(lp.decided)) + " (" +
                                 schemes::kernel_methods_text() + " have one)");
    const auto& contract = schemes::contract_of(lp.decided);
    const key_id weight_key = contract.weight_key;
    // One per-tensor scale covers a fused layer's shards and a MoE expert's gate and up (spec §4, §9).
    const bool joint_scale = contract.scales == fp8::weight_scales::per_tensor;
    const bool blocks = contract.scales == fp8::weight_scales::block_128x128;
    auto add = [&](const std::string& tensor, key_id key, int joint_id) {
      need(layer.name, tensor);
      members[tensor] = member{tensor, key, contract.checkpoint_scale, joint_id};
      if (joint_id >= 0) {
        if (joints.size() <= static_cast<std::size_t>(joint_id)) joints.resize(static_cast<std::size_t>(joint_id) + 1);
        joints[static_cast<std::size_t>(joint_id)].push_back(tensor);
      }
    };
    if (layer.kind == layer_kind::moe) {
      const std::int64_t experts = layer.num_experts.value_or(0);
      if (experts <= 0) throw config_error("", "MoE layer " + layer.name + " has no num_experts in the model description");
      for (std::int64_t e = 0; e < experts; ++e) {
        const auto base = layer.name + "." + std::to_string(e) + ".";
        const bool named = ck.by_name.count(base + "gate_proj.weight") > 0;
        const auto gate = base + (named ? "gate_proj" : "w1") + ".weight", up = base + (named ? "up_proj" : "w3") + ".weight";
        const auto down = base + (named ? "down_proj" : "w2") + ".weight";
        const int j = joint_scale ? joint++ : -1;
        const key_id w13_key = contract.moe_w13_key.value_or(weight_key);
        add(gate, w13_key, j);
        add(up, w13_key, j);
        add(down, weight_key, -1);
      }
      continue;
    }
    const auto* fused = model.fused_entry(layer.name);
    if (!fused || ck.by_name.count(layer.name + ".weight")) {
      add(layer.name + ".weight", weight_key, -1);
      continue;
    }
    const int j = joint_scale ? joint++ : -1;
    std::vector<std::int64_t> rows;
    for (const auto& s : fused->shards) {
      const auto tensor = text::replace_all(layer.name, fused->fused, s) + ".weight";
      rows.push_back(need(layer.name, tensor).info->shape[0]);
      add(tensor, weight_key, j);
    }
    if (blocks)
      for (auto r : rows)
        if (r % schemes::block_k != 0)
          throw config_error("", std::string(to_string(lp.decided)) + " needs every shard of " + layer.name + " to have a multiple of " +
                                     std::to_string(schemes::block_k) + " rows, got " + checked::shape_text(rows));
  }

  // Output layout: input order; a quantized weight is followed by its scale.
  std::vector<st::tensor_spec> specs;
  for (const auto& t : ck.order) {
    const auto it = members.find(t.info->name);
    if (it == members.end()) {
      specs.push_back({t.info->name, t.info->type, t.info->shape});
      continue;
    }
    specs.push_back({t.info->name, st::dtype::F8_E4M3, t.info->shape});
    const auto& m = it->second;
    const auto rows = t.info->shape[0], cols = t.info->shape[1];
    specs.push_back({scale_name(m), st::dtype::F32, tensor_scale_shape(m.key, rows, cols)});
  }
  std::map<std::string, std::string> metadata{{"format", "pt"}};
  for (const auto& f : ck.files)
    if (auto it = f->metadata().find("format"); it != f->metadata().end()) metadata["format"] = it->second;
  for (std::size_t i = 0; i < model.layers.size(); ++i)
    if (p.layers[i].quantized()) {
      std::string rule(to_string(p.layers[i].source));
      if (p.layers[i].pattern >= 0) rule += " " + text::py_repr(p.pattern_of(p.layers[i]));
      metadata["qpolicy.plan." + model.layers[i].name] = std::string(to_string(p.layers[i].decided)) + " (" + rule + ")";
    }
  // The config block first (it depends on the plan alone), then the checkpoint; both appear together.
  output_transaction outputs;
  std::string config_text;
  if (!req.config_out.empty()) config_text = quantization_config_json(model, p, sum.warnings);
  st::writer out(outputs.stage(req.output), specs, metadata);

  // Quantize joint groups together (one scale from the joint amax), everything else alone.
  std::map<std::string, unit_result> ready;
  tensor_quant_options qo;
  qo.device = req.device;
  qo.threads = req.threads;
  auto run_joint = [&](int j) {
    std::vector<const member*> group;
    for (const auto& name : joints[static_cast<std::size_t>(j)]) group.push_back(&members.at(name));
    // Concatenated rows, as vLLM's fused weight (or w13) holds them, widened to float32 (exact).
    std::int64_t rows = 0, cols = ck.by_name.at(group.front()->tensor).info->shape[1];
    for (const auto* m : group) {
      const auto& t = ck.by_name.at(m->tensor);
      check_finite(t);
      if (t.info->shape[1] != cols)
        throw config_error("", "tensors " + text::py_repr(group.front()->tensor) + " and " + text::py_repr(m->tensor) +
                                   " share a per-tensor scale but have different widths " + std::to_string(cols) + " and " +
                                   std::to_string(t.info->shape[1]));
      rows += t.info->shape[0];
    }
    const auto joined_size = checked::mul(rows, cols);
    if (!joined_size) throw config_error("", "the tensors sharing a scale with " + text::py_repr(group.front()->tensor) + " are too large");
    std::vector<float> joined(static_cast<std::size_t>(*joined_size));
    std::int64_t at = 0;
    std::vector<std::uint32_t> scratch;
    for (const auto* m : group) {
      const auto x = view_of(ck.by_name.at(m->tensor), scratch);
      for (std::int64_t i = 0; i < x.size(); ++i) joined[static_cast<std::size_t>(at + i)] = x.at(i);
      at += x.size();
    }
    qo.name = group.front()->tensor;
    auto r = quantize_tensor(group.front()->key, {joined.data(), fp8::element::f32, rows, cols}, qo);
    at = 0;
    for (const auto* m : group) {
      const auto n = ck.by_name.at(m->tensor).info->elements();
      ready[m->tensor] = {std::vector<std::uint8_t>(r.codes.begin() + at, r.codes.begin() + at + n), r.scales, {1}};
      at += n;
    }
  };
  std::set<std::string> layer_names;
  for (const auto& l : model.layers) {
    layer_names.insert(l.name);
    if (const auto* f = model.fused_entry(l.name))
      for (const auto& shard : f->shards) layer_names.insert(text::replace_all(l.name, f->fused, shard));
  }
  std::size_t done = 0;
  for (const auto& t : ck.order) {
    const auto it = members.find(t.info->name);
    const auto data = t.file->data(*t.info);
    sum.bytes_in += data.size();
    ++sum.tensors;
    if (it == members.end()) {
      out.write(data);
      sum.bytes_out += data.size();
      ++sum.copied;
      bool planned = false;  // some dotted prefix of the name is a layer (or a fused layer's shard)
      for (auto cut = t.info->name.rfind('.'); cut != std::string::npos && !planned; cut = t.info->name.rfind('.', cut - 1)) {
        planned = layer_names.count(t.info->name.substr(0, cut)) > 0;
        if (cut == 0) break;
      }
      if (!planned) sum.unmatched.push_back(t.info->name);
    } else {
      const auto& m = it->second;
      if (!ready.count(m.tensor)) {
        if (m.joint >= 0) {
          run_joint(m.joint);
        } else {
          check_finite(t);
          qo.name = m.tensor;
          std::vector<std::uint32_t> scratch;
          auto r = quantize_tensor(m.key, view_of(t, scratch), qo);
          ready[m.tensor] = {std::move(r.codes), std::move(r.scales), std::move(r.scale_shape)};
        }
      }
      const auto& r = ready.at(m.tensor);
      out.write(std::as_bytes(std::span(r.codes)));
      out.write(std::as_bytes(std::span(r.scales)));
      sum.bytes_out += r.codes.size() + r.scales.size() * 4;
      ++sum.quantized;
      ready.erase(m.tensor);
    }
    if (req.progress) req.progress(++done, ck.order.size());
  }
  out.finish();
  if (!req.config_out.empty()) outputs.stage(req.config_out).write(config_text + "\n");
  outputs.commit();
  sum.notes = outputs.notes();
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sum;
}

}  // namespace qpolicy
