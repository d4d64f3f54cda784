// `qpolicy quantize`, stage by stage (checkpoint_stages.hpp): the units of the plan, the output
// layout, the streaming quantization and the config block.
#include "checkpoint_stages.hpp"

#include "checkpoint_format.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>
#include <span>

#include "qpolicy/core/checked.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy::checkpoint_io {

namespace {

namespace st = safetensors;

bool is_float(st::dtype d) { return d == st::dtype::BF16 || d == st::dtype::F16 || d == st::dtype::F32; }

fp8::element element_of(st::dtype d) {
  return d == st::dtype::BF16 ? fp8::element::bf16 : d == st::dtype::F16 ? fp8::element::f16 : fp8::element::f32;
}

/// A 2-D weight as a kernel input (copied into `scratch` when the file holds it misaligned).
fp8::input_view view_of(const tensor_ref& t, std::vector<std::uint32_t>& scratch) {
  return aligned_input(t.file->data(*t.info), element_of(t.info->type), t.info->shape[0], t.info->shape[1], scratch);
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


/// The tensor a planned layer needs: present, 2-D floating point, not empty.
const tensor_ref& need(const checkpoint& ck, const std::string& layer, const std::string& tensor) {
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
}

/// The members of one quantized layer, added to `u`; `joint` numbers the joint units.
void add_layer_members(const checkpoint& ck, const model_desc& model, const layer_desc& layer, const layer_plan& lp,
                       checkpoint_format format, quant_units& u, int& joint) {
  // The checkpoint writer knows the FP8 formats ("codes + one float32 scale tensor"); the low-precision
  // schemes have kernels (quantize-tensor, the forward passes) but no checkpoint format yet (issue 15).
  if (!schemes::has_kernels(lp.decided))
    throw config_error("", "layer " + layer.name + " is planned as " + std::string(to_string(lp.decided)) +
                               ", but quantize has no checkpoint format for " + std::string(to_string(lp.decided)) + " yet (" +
                               schemes::kernel_methods_text() + " have one; qpolicy quantize-tensor runs its formulas)");
  const auto& contract = schemes::contract_of(lp.decided);
  const key_id weight_key = contract.weight_key;
  // One per-tensor scale covers a fused layer's shards and a MoE expert's gate and up (spec §4, §9).
  const bool joint_scale = contract.scales == fp8::weight_scales::per_tensor;
  const bool blocks = contract.scales == fp8::weight_scales::block_128x128;
  auto add = [&](const std::string& tensor, key_id key, int joint_id) {
    need(ck, layer.name, tensor);
    u.members[tensor] = member{tensor, key, scale_suffix(format, lp.decided), joint_id};
    if (joint_id >= 0) {
      if (u.joints.size() <= static_cast<std::size_t>(joint_id)) u.joints.resize(static_cast<std::size_t>(joint_id) + 1);
      u.joints[static_cast<std::size_t>(joint_id)].push_back(tensor);
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
    return;
  }
  const auto* fused = model.fused_entry(layer.name);
  if (!fused || ck.by_name.count(layer.name + ".weight")) {
    add(layer.name + ".weight", weight_key, -1);
    return;
  }
  const int j = joint_scale ? joint++ : -1;
  std::vector<std::int64_t> rows;
  for (const auto& s : fused->shards) {
    const auto tensor = text::replace_all(layer.name, fused->fused, s) + ".weight";
    rows.push_back(need(ck, layer.name, tensor).info->shape[0]);
    add(tensor, weight_key, j);
  }
  if (blocks)
    for (auto r : rows)
      if (r % schemes::block_k != 0)
        throw config_error("", std::string(to_string(lp.decided)) + " needs every shard of " + layer.name + " to have a multiple of " +
                                   std::to_string(schemes::block_k) + " rows, got " + checked::shape_text(rows));
}


/// Quantizes joint unit `j` as one tensor (its members' rows concatenated, as vLLM's fused weight or
/// w13 holds them, widened to float32 exactly): one scale from the joint amax. Results go to `ready`.
void quantize_joint(const checkpoint& ck, const quant_units& units, int j, tensor_quant_options& qo,
                    std::map<std::string, quantized_member>& ready) {
  std::vector<const member*> group;
  for (const auto& name : units.joints[static_cast<std::size_t>(j)]) group.push_back(&units.members.at(name));
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
}

/// The names of the model's layers and of its fused layers' shards.
std::set<std::string> layer_names_of(const model_desc& model) {
  std::set<std::string> names;
  for (const auto& l : model.layers) {
    names.insert(l.name);
    if (const auto* f = model.fused_entry(l.name))
      for (const auto& shard : f->shards) names.insert(text::replace_all(l.name, f->fused, shard));
  }
  return names;
}

/// Whether some dotted prefix of a tensor's name is a layer (or a fused layer's shard).
bool belongs_to_layer(const std::set<std::string>& layer_names, const std::string& name) {
  for (auto cut = name.rfind('.'); cut != std::string::npos; cut = name.rfind('.', cut - 1)) {
    if (layer_names.count(name.substr(0, cut))) return true;
    if (cut == 0) break;
  }
  return false;
}

}  // namespace

std::string scale_name(const member& m) {
  const auto base = m.tensor.substr(0, m.tensor.size() - std::string(".weight").size());
  return base + "." + std::string(m.scale_suffix);
}

quant_units plan_units(const checkpoint& ck, const model_desc& model, const plan& p, checkpoint_format format) {
  quant_units u;
  int joint = 0;
  for (std::size_t i = 0; i < model.layers.size(); ++i)
    if (p.layers[i].quantized()) add_layer_members(ck, model, model.layers[i], p.layers[i], format, u, joint);
  return u;
}

output_layout plan_output(const checkpoint& ck, const quant_units& units, const model_desc& model, const plan& p) {
  output_layout o;
  for (const auto& t : ck.order) {
    const auto it = units.members.find(t.info->name);
    if (it == units.members.end()) {
      o.specs.push_back({t.info->name, t.info->type, t.info->shape});
      continue;
    }
    // Codes and scales in the element types of the member's quant key (F8_E4M3 and F32 for FP8).
    const auto& m = it->second;
    const auto& key = key_of(m.key);
    o.specs.push_back({t.info->name, st::stored_type(key.data), t.info->shape});
    const auto rows = t.info->shape[0], cols = t.info->shape[1];
    o.specs.push_back({scale_name(m), st::stored_type(key.scale.type), tensor_scale_shape(m.key, rows, cols)});
  }
  o.metadata = {{"format", "pt"}};
  for (const auto& f : ck.files)
    if (auto it = f->metadata().find("format"); it != f->metadata().end()) o.metadata["format"] = it->second;
  for (std::size_t i = 0; i < model.layers.size(); ++i)
    if (p.layers[i].quantized()) {
      const auto& l = p.layers[i];
      const std::string pattern = l.pattern >= 0 ? " " + text::py_repr(p.pattern_of(l)) : std::string();
      o.metadata[fmt::format("qpolicy.plan.{}", model.layers[i].name)] =
          fmt::format("{} ({}{})", to_string(l.decided), to_string(l.source), pattern);
    }
  return o;
}

tensor_streamer::tensor_streamer(const checkpoint& ck, const conversion& c, const checkpoint_request& req,
                                 checkpoint_summary& sum)
    : ck_(ck), c_(c), req_(req), sum_(sum), layer_names_(layer_names_of(c.model)) {
  options_.device = req.device;
  options_.threads = req.threads;
}

void tensor_streamer::stream(std::size_t begin, std::size_t end, st::writer& out) {
  for (std::size_t i = begin; i < end; ++i) {
    const auto& t = ck_.order[i];
    const auto it = c_.units.members.find(t.info->name);
    const auto data = t.file->data(*t.info);
    sum_.bytes_in += data.size();
    ++sum_.tensors;
    if (it == c_.units.members.end()) {
      out.write(data);
      sum_.bytes_out += data.size();
      ++sum_.copied;
      if (!belongs_to_layer(layer_names_, t.info->name)) sum_.unmatched.push_back(t.info->name);
    } else {
      const auto& m = it->second;
      if (!ready_.count(m.tensor)) {
        if (m.joint >= 0) {
          quantize_joint(ck_, c_.units, m.joint, options_, ready_);
        } else {
          check_finite(t);
          options_.name = m.tensor;
          std::vector<std::uint32_t> scratch;
          auto r = quantize_tensor(m.key, view_of(t, scratch), options_);
          ready_[m.tensor] = {std::move(r.codes), std::move(r.scales), std::move(r.scale_shape)};
        }
      }
      const auto& r = ready_.at(m.tensor);
      out.write(std::as_bytes(std::span(r.codes)));
      out.write(std::as_bytes(std::span(r.scales)));
      sum_.bytes_out += r.codes.size() + r.scales.size() * 4;
      ++sum_.quantized;
      ready_.erase(m.tensor);
    }
    if (req_.progress) req_.progress(++done_, ck_.order.size());
  }
}

}  // namespace qpolicy::checkpoint_io
