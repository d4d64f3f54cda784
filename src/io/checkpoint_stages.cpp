// `qpolicy quantize`, stage by stage (checkpoint_stages.hpp): the units of the plan and the output layout;
// the streaming quantization is tensor_streamer.cpp's.
#include "checkpoint_stages.hpp"

#include "checkpoint_format.hpp"

#include <fmt/format.h>

#include <map>
#include <set>

#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy::checkpoint_io {

namespace {

namespace st = safetensors;

bool is_float(st::dtype d) { return d == st::dtype::BF16 || d == st::dtype::F16 || d == st::dtype::F32; }


st::dtype stored_dtype(element e) { return e == element::bf16 ? st::dtype::BF16 : e == element::f16 ? st::dtype::F16 : st::dtype::F32; }

/// Whether the checkpoint stores module `m`'s weight (as a float or FP8 weight, or packed codes).
bool has_weight(const checkpoint& ck, const std::string& m) {
  return ck.by_name.count(m + ".weight") > 0 || ck.by_name.count(m + ".weight_packed") > 0;
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

/// Refuses, before any output, a weight low-precision formula `f` cannot take: an F32 weight for a
/// formula that computes in the model dtype, a width its blocks do not tile.
void check_low_precision_input(const member& m, method scheme, schemes::formula id, const layer_desc& layer,
                               std::int64_t rotation) {
  const auto& f = schemes::formula_of(id);
  const auto where = " (" + weight_text(m) + " of layer " + layer.name + ")";
  // vLLM checks the Hadamard size first (InputHadamardLinearMethod wraps the MXFP4 method).
  if (rotation && m.cols % rotation != 0)
    throw config_error("", schemes::hadamard_size_message(m.cols, rotation) + where);
  if (f.model_dtype_only && m.type == st::dtype::F32)
    throw config_error("", std::string(to_string(scheme)) + " computes in the model's dtype (low-precision-numerics.md " +
                               std::string(f.section) + ") and takes BF16 or F16 weights, not F32" + where);
  const auto cols = m.cols;
  if (cols % f.k_multiple != 0) {
    // The online MXFP4 MoE path pads experts to whole blocks (§4.1); a checkpoint stores whole blocks.
    const bool padded = layer.kind == layer_kind::moe && schemes::contract_of(scheme).moe_pads;
    throw config_error("", schemes::block_message(f, cols) + where +
                               (padded ? "; vLLM's online path pads experts to whole blocks, but a checkpoint stores the "
                                         "unpadded weights and must tile them"
                                       : ""));
  }
}

/// The members of one quantized layer, added to `u`; `joint` numbers the joint units.
void add_layer_members(const checkpoint& ck, const model_desc& model, const layer_desc& layer, const layer_plan& lp,
                       checkpoint_format format, quant_units& u, int& joint, const quantized_input* input,
                       const composed_layer* composed) {
  const bool requantized = composed && composed->kind == composition::requantized;
  // The writer knows every scheme with kernels; a scheme without them has nothing to write.
  const auto formula = schemes::weight_formula_of(lp.decided);
  if (!schemes::has_kernels(lp.decided))
    throw config_error("", "layer " + layer.name + " is planned as " + std::string(to_string(lp.decided)) +
                               ", but quantize has no checkpoint format for " + std::string(to_string(lp.decided)) + " (" +
                               schemes::kernel_methods_text() + " have one)");
  if (formula && schemes::formula_of(*formula).codes == schemes::code_format::lut3_tiles)
    throw config_error("", "layer " + layer.name + " is planned as " + std::string(to_string(lp.decided)) +
                               ", but no checkpoint format holds LUT-B tiles (compressed-tensors has none, and vLLM 0.34 "
                               "quantizes LUT-B online from the model's weights only); let vLLM quantize the experts "
                               "online (-q lut_b_moe), or leave them unquantized");
  const auto& contract = schemes::contract_of(lp.decided);
  const key_id weight_key = contract.weight_key;
  // One per-tensor scale covers a fused layer's shards and a MoE expert's gate and up (spec §4, §9);
  // one NVFP4 global scale covers an expert's gate and up (w13, low-precision-numerics.md §6.2).
  const bool joint_scale = contract.scales == fp8::weight_scales::per_tensor ||
                           (formula && schemes::formula_of(*formula).second == schemes::second_scale::per_tensor);
  const bool blocks = contract.scales == fp8::weight_scales::block_128x128;
  // A rotated layer's weights go through the rotating formula with the layer's size (the rotation itself
  // travels as the checkpoint's transform_config).
  const std::int64_t rotation = hadamard_size_of(lp);
  auto add = [&](const std::string& tensor, key_id key, int joint_id) -> const member& {
    auto f = *schemes::formula_of_key(key);
    if (rotation) f = *schemes::rotated_weight_formula(f);
    member m;
    m.tensor = tensor;
    m.formula = f;
    m.scale_suffix = scale_suffix(format, lp.decided);
    m.scale_shape = scale_spelling_of(format, lp.decided);
    m.joint = joint_id;
    m.transform_size = rotation;
    std::string input_name = tensor;
    if (requantized) {
      // The checkpoint's stored weight, decoded to the model dtype, is what the online formula quantizes.
      m.stored = stored_weight_of(ck, *input, composed->checkpoint, tensor.substr(0, tensor.size() - 7), layer.name);
      input_name = m.stored->codes;
      m.type = stored_dtype(input->dtype);
      m.rows = m.stored->rows, m.cols = m.stored->cols;
    } else {
      const auto& t = need(ck, layer.name, tensor);
      m.type = t.info->type;
      m.rows = t.info->shape[0], m.cols = t.info->shape[1];
    }
    if (formula) check_low_precision_input(m, lp.decided, *formula, layer, rotation);
    if (joint_id >= 0) {
      if (u.joints.size() <= static_cast<std::size_t>(joint_id)) u.joints.resize(static_cast<std::size_t>(joint_id) + 1);
      u.joints[static_cast<std::size_t>(joint_id)].push_back(input_name);
    }
    return u.members[input_name] = std::move(m);
  };
  if (layer.kind == layer_kind::moe) {
    const std::int64_t experts = layer.num_experts.value_or(0);
    if (experts <= 0) throw config_error("", "MoE layer " + layer.name + " has no num_experts in the model description");
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto base = layer.name + "." + std::to_string(e) + ".";
      const bool named = has_weight(ck, base + "gate_proj");
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
  if (!fused || has_weight(ck, layer.name)) {
    add(layer.name + ".weight", weight_key, -1);
    return;
  }
  const int j = joint_scale ? joint++ : -1;
  std::vector<std::int64_t> rows;
  for (const auto& s : fused->shards) {
    const auto tensor = text::replace_all(layer.name, fused->fused, s) + ".weight";
    rows.push_back(add(tensor, weight_key, j).rows);
  }
  if (blocks)
    for (auto r : rows)
      if (r % schemes::block_k != 0)
        throw config_error("", std::string(to_string(lp.decided)) + " needs every shard of " + layer.name + " to have a multiple of " +
                                   std::to_string(schemes::block_k) + " rows, got " + checked::shape_text(rows));
}

}  // namespace

element element_of(st::dtype d) {
  return d == st::dtype::BF16 ? element::bf16 : d == st::dtype::F16 ? element::f16 : element::f32;
}

std::string weight_text(const member& m) {
  return m.stored ? "the decoded weight of " + m.stored->module + " (from " + text::py_repr(m.stored->codes) + ")"
                  : "tensor " + text::py_repr(m.tensor);
}

std::string module_of(const member& m) { return m.tensor.substr(0, m.tensor.size() - std::string(".weight").size()); }

std::string scale_name(const member& m) { return module_of(m) + "." + std::string(m.scale_suffix); }

quant_units plan_units(const checkpoint& ck, const model_desc& model, const plan& p, checkpoint_format format,
                       const quantized_input* input, const composed_plan* composed) {
  quant_units u;
  int joint = 0;
  for (std::size_t i = 0; i < model.layers.size(); ++i)
    if (p.layers[i].quantized())
      add_layer_members(ck, model, model.layers[i], p.layers[i], format, u, joint, input, composed ? &composed->layers[i] : nullptr);
  // Each rotation's one transform weight follows its first module's tensors.
  for (const auto& g : rotation_groups(model, p)) u.members.at(g.modules.front() + ".weight").transform_tensor = transform_tensor_name(g);
  return u;
}

output_layout plan_output(const checkpoint& ck, const quant_units& units, const model_desc& model, const plan& p,
                          const std::set<std::string>& dropped, const std::map<std::string, std::string>& renamed) {
  output_layout o;
  for (const auto& t : ck.order) {
    o.first_spec.push_back(o.specs.size());
    const auto it = units.members.find(t.info->name);
    if (it == units.members.end()) {
      if (dropped.count(t.info->name)) continue;  // a requantized weight's stored tensors: its new ones replace them
      const auto r = renamed.find(t.info->name);
      o.specs.push_back({r == renamed.end() ? t.info->name : r->second, t.info->type, t.info->shape});
      continue;
    }
    const auto& m = it->second;
    if (schemes::formula_of(m.formula).low_precision()) {  // the tensors compressed-tensors stores the formula's outputs as
      for (const auto& s : low_precision_tensors(m.formula, m.type, m.rows, m.cols))
        o.specs.push_back({module_of(m) + "." + std::string(s.suffix), s.type, s.shape});
      if (!m.transform_tensor.empty()) o.specs.push_back({m.transform_tensor, st::dtype::F32, {m.transform_size, m.transform_size}});
      continue;
    }
    // FP8 codes and their float32 scales, as vllm-fp8 and compressed-tensors' float-quantized store them.
    const key_id key = *schemes::formula_of(m.formula).key;
    o.specs.push_back({m.tensor, st::stored_type(key_of(key).data), {m.rows, m.cols}});
    auto shape = tensor_scale_shape(key, m.rows, m.cols);  // the same bytes in each spelling
    if (m.scale_shape == scale_spelling::rows_1d) shape = {shape[0]};
    if (m.scale_shape == scale_spelling::blocks_4d) shape = {shape[0], 1, shape[1], 1};
    o.specs.push_back({scale_name(m), st::stored_type(key_of(key).scale.type), std::move(shape)});
  }
  o.first_spec.push_back(o.specs.size());
  o.metadata = {{"format", "pt"}};
  for (const auto& f : ck.files)
    if (auto it = f->metadata().find("format"); it != f->metadata().end()) o.metadata["format"] = it->second;
  for (std::size_t i = 0; i < model.layers.size(); ++i)
    if (p.layers[i].quantized()) {
      const auto& l = p.layers[i];
      const std::string pattern = l.pattern >= 0 ? fmt::format(" {}", text::py_repr(p.pattern_of(l))) : std::string();
      o.metadata[fmt::format("qpolicy.plan.{}", model.layers[i].name)] =
          fmt::format("{} ({}{})", to_string(l.decided), to_string(l.source), pattern);
    }
  return o;
}

}  // namespace qpolicy::checkpoint_io
