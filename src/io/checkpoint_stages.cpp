// `qpolicy quantize`, stage by stage (checkpoint_stages.hpp): the units of the plan, the output
// layout, the streaming quantization and the config block.
#include "checkpoint_stages.hpp"

#include "checkpoint_format.hpp"
#include "chunk_io.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <span>

#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/numerics/low_precision.hpp"
#include "qpolicy/numerics/detail/hadamard.hpp"
#include "qpolicy/numerics/detail/low_precision_blocks.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy::checkpoint_io {

namespace {

namespace st = safetensors;

bool is_float(st::dtype d) { return d == st::dtype::BF16 || d == st::dtype::F16 || d == st::dtype::F32; }

element element_of(st::dtype d) {
  return d == st::dtype::BF16 ? element::bf16 : d == st::dtype::F16 ? element::f16 : element::f32;
}

/// A 2-D weight as a kernel input (copied into `scratch` when the file holds it misaligned).
input_view view_of(const tensor_ref& t, std::vector<std::uint32_t>& scratch) {
  return aligned_input(t.file->data(*t.info), element_of(t.info->type), t.info->shape[0], t.info->shape[1], scratch);
}


/// Refuses weights with NaN or infinity: their codes would be saturated garbage. `what` names the weight.
void check_finite(const input_view& x, const std::string& what) {
  if (const auto bad = cpu::count_non_finite(x))
    throw config_error("", what + " holds " + std::to_string(bad) +
                               " NaN or infinite values; refusing to quantize it (its codes and scale would be meaningless)");
}

/// How a member's weight is named in messages: its tensor, or the tensor its decode starts from.
std::string weight_text(const member& m) {
  return m.stored ? "the decoded weight of " + m.stored->module + " (from " + text::py_repr(m.stored->codes) + ")"
                  : "tensor " + text::py_repr(m.tensor);
}

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


/// Quantizes joint unit `j` as one tensor (its members' rows concatenated, as vLLM's fused weight or
/// w13 holds them, widened to float32 exactly): one scale from the joint amax. `whole` gives a
/// member's whole weight. Results go to `ready`, by member key.
void quantize_joint(const quant_units& units, int j, tensor_quant_options& qo, const std::function<input_view(const member&)>& whole,
                    std::map<std::string, std::vector<stored_part>>& ready) {
  const auto& keys = units.joints[static_cast<std::size_t>(j)];
  std::vector<const member*> group;
  for (const auto& key : keys) group.push_back(&units.members.at(key));
  std::int64_t rows = 0, cols = group.front()->cols;
  for (const auto* m : group) {
    if (m->cols != cols)
      throw config_error("", weight_text(*group.front()) + " and " + weight_text(*m) + " share a per-tensor scale but have different widths " +
                                 std::to_string(cols) + " and " + std::to_string(m->cols));
    rows += m->rows;
  }
  const auto joined_size = checked::mul(rows, cols);
  if (!joined_size) throw config_error("", "the weights sharing a scale with " + weight_text(*group.front()) + " are too large");
  std::vector<float> joined(static_cast<std::size_t>(*joined_size));
  std::int64_t at = 0;
  for (const auto* m : group) {
    const auto x = whole(*m);
    check_finite(x, weight_text(*m));
    for (std::int64_t i = 0; i < x.size(); ++i) joined[static_cast<std::size_t>(at + i)] = x.at(i);
    at += x.size();
  }
  qo.name = group.front()->tensor;
  const auto r = quantize_tensor_parts(group.front()->formula, {joined.data(), element::f32, rows, cols}, qo);
  at = 0;
  for (std::size_t i = 0; i < group.size(); ++i) {
    const auto n = group[i]->rows * group[i]->cols;
    ready[keys[i]] = {{r[0].suffix, r[0].type, {}, std::vector<std::uint8_t>(r[0].bytes.begin() + at, r[0].bytes.begin() + at + n)}, r[1]};
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
  for (const auto& t : ck.order) bytes_total_ += t.info->end - t.info->begin;
}

void tensor_streamer::stream(std::size_t begin, std::size_t end, st::writer& out) {
  for (std::size_t i = begin; i < end; ++i) {
    const auto& t = ck_.order[i];
    // The next tensor's first chunk is read while this one is worked on (most tensors are one chunk).
    read_buffers_.set_next(i + 1 < end ? &ck_.order[i + 1] : nullptr);
    const auto it = c_.units.members.find(t.info->name);
    sum_.bytes_in += t.info->end - t.info->begin;
    ++sum_.tensors;
    if (it == c_.units.members.end() && c_.dropped.count(t.info->name)) {
      ++sum_.replaced;
    } else if (it == c_.units.members.end()) {
      // Copied a chunk at a time, the next one read meanwhile.
      const auto data = t.file->data(*t.info);
      chunk_reader reader(t, st::size_of(t.info->type), read_buffers_);
      for (auto piece = reader.next(); !piece.empty(); piece = reader.next()) out.write(piece);
      sum_.bytes_out += data.size();
      ++sum_.copied;
      if (!belongs_to_layer(layer_names_, t.info->name)) sum_.unmatched.push_back(t.info->name);
    } else {
      write_member(t, it->second, out);
      ++sum_.quantized;
      sum_.requantized += it->second.stored.has_value();
    }
    ++done_;
    if (req_.progress) req_.progress(sum_.bytes_in, bytes_total_, done_, ck_.order.size());
  }
}

const std::vector<std::uint32_t>& tensor_streamer::decoded(const member& m) {
  auto it = decoded_.find(m.stored->codes);
  if (it == decoded_.end()) {
    it = decoded_.emplace(m.stored->codes, std::vector<std::uint32_t>()).first;
    decode_weight(ck_, *m.stored, read_buffers_, c_.input->dtype, it->second, req_.threads);
  }
  return it->second;
}

template <class Fn>
void tensor_streamer::for_each_chunk(const tensor_ref& t, const member& m, std::size_t granule, Fn&& fn) {
  if (!m.stored) {
    chunk_reader reader(t, granule, read_buffers_);
    for (auto bytes = reader.next(); !bytes.empty(); bytes = reader.next()) fn(bytes);
    return;
  }
  // A decoded weight is in memory already: chunks of the same size as a read's.
  const auto all = std::as_bytes(std::span(decoded(m))).first(static_cast<std::size_t>(m.rows * m.cols) * st::size_of(m.type));
  const std::size_t step = std::max<std::size_t>(granule, static_cast<std::size_t>(chunk_bytes) / granule * granule);
  for (std::size_t at = 0; at < all.size(); at += step) fn(all.subspan(at, std::min(step, all.size() - at)));
}

void tensor_streamer::write_member(const tensor_ref& t, const member& m, st::writer& out) {
  const auto& f = schemes::formula_of(m.formula);
  const element type = element_of(m.type);
  // One amax per unit sets a per-tensor scale: FP8 per-tensor weights' scale, NVFP4's global scale
  // (a fused layer's shards and an expert's gate and up share it).
  const bool unit_scale = f.takes_amax;
  const auto key = t.info->name;
  if (unit_scale && !f.low_precision() && req_.device == device_kind::cuda) {
    // The CUDA FP8 per-tensor kernel finds its own amax: a whole unit (a joint unit as one tensor) at a time.
    std::vector<std::uint32_t> scratch;
    auto whole = [&](const member& x) -> input_view {
      if (x.stored) return {decoded(x).data(), type, x.rows, x.cols};
      return view_of(ck_.by_name.at(x.tensor), scratch);
    };
    if (!ready_.count(key)) {
      if (m.joint >= 0) {
        quantize_joint(c_.units, m.joint, options_, whole, ready_);
      } else {
        const auto x = whole(m);
        check_finite(x, weight_text(m));
        options_.name = m.tensor;
        ready_[key] = quantize_tensor_parts(m.formula, x, options_);
      }
    }
    for (const auto& part : ready_.at(key)) {
      out.write(std::as_bytes(std::span(part.bytes)));
      sum_.bytes_out += part.bytes.size();
    }
    ready_.erase(key);
    if (m.stored) decoded_.erase(m.stored->codes);
    return;
  }
  // Row chunks (whole 128-row slabs for 128x128 blocks): given the unit's amax, found in a pass before,
  // every formula is row-local, so the chunks' bits equal one whole call's. The scales wait for the codes.
  options_.amax = unit_scale ? std::optional<float>(unit_amax(t, m)) : std::nullopt;
  options_.name = m.tensor;
  options_.transform_size = m.transform_size;
  // NaN or infinity in a row or block makes its scale so where the formula's amax propagates NaN (the
  // FP8 weight formulas); the others' amax ignores NaN, so their chunks are counted first.
  const bool scales_show_non_finite = !f.low_precision() && f.weight;
  const std::int64_t multiple = f.group.row > 1 ? f.group.row : 1;
  const std::int64_t cols = m.cols;
  const std::size_t row_bytes = st::size_of(m.type) * static_cast<std::size_t>(cols);
  // The message counts the whole weight.
  auto refuse_non_finite = [&] {
    std::vector<std::uint32_t> scratch;
    check_finite(m.stored ? input_view{decoded(m).data(), type, m.rows, m.cols} : view_of(t, scratch), weight_text(m));
  };
  std::vector<std::uint8_t> scales;
  chunk_writer writer(out, code_buffers_);
  for_each_chunk(t, m, row_bytes * static_cast<std::size_t>(multiple), [&](std::span<const std::byte> bytes) {
    const input_view x{bytes.data(), type, static_cast<std::int64_t>(bytes.size() / row_bytes), cols};
    if (!scales_show_non_finite && cpu::count_non_finite(x)) refuse_non_finite();
    quantize_tensor_parts_into(m.formula, x, options_, parts_);
    if (scales_show_non_finite && !unit_scale)
      for (std::size_t i = 0; i + 4 <= parts_[1].bytes.size(); i += 4) {
        float sc;
        std::memcpy(&sc, parts_[1].bytes.data() + i, 4);
        if (!std::isfinite(sc)) refuse_non_finite();
      }
    store_chunk(m, writer, scales);
  });
  writer.finish();
  if (m.stored) decoded_.erase(m.stored->codes);
  out.write(std::as_bytes(std::span(scales)));
  sum_.bytes_out += scales.size();
  if (f.second == schemes::second_scale::per_tensor) {
    // compressed-tensors stores the encode scale gs; vLLM's weight_scale_2 is its reciprocal, which is
    // what the kernel's tensor scale holds (1/gs): the same bits either way.
    const float gs = lp::nvfp4_global_scale(*options_.amax);
    out.write(std::as_bytes(std::span(&gs, 1)));
    sum_.bytes_out += 4;
  }
  if (f.codes == schemes::code_format::int8) {  // pack-quantized's weight_shape
    const std::int64_t shape[2] = {m.rows, cols};
    out.write(std::as_bytes(std::span(shape)));
    sum_.bytes_out += sizeof shape;
  }
  if (!m.transform_tensor.empty()) {
    // The unnormalized Sylvester matrix, as compressed-tensors saves a hadamard transform's weight.
    std::vector<float> h(static_cast<std::size_t>(m.transform_size * m.transform_size));
    for (std::int64_t i = 0; i < m.transform_size; ++i)
      for (std::int64_t j = 0; j < m.transform_size; ++j) h[static_cast<std::size_t>(i * m.transform_size + j)] = lp::hadamard_entry(i, j, 1.0f);
    out.write(std::as_bytes(std::span(h)));
    sum_.bytes_out += h.size() * sizeof(float);
  }
  options_.amax.reset();
  options_.transform_size = 0;
}

void tensor_streamer::store_chunk(const member& m, chunk_writer& writer, std::vector<std::uint8_t>& scales) {
  const auto& f = schemes::formula_of(m.formula);
  auto& codes = writer.buffer();
  if (f.codes == schemes::code_format::int8) {
    // compressed-tensors' pack_to_int32 at 8 bits: code + 128 in byte i of each little-endian int32,
    // rows padded with zero bytes to whole int32s.
    const std::int64_t rows = parts_[0].shape[0], cols = parts_[0].shape[1], packed = (cols + 3) / 4 * 4;
    codes.assign(static_cast<std::size_t>(rows * packed), 0);
    const auto offset = [](const std::uint8_t* __restrict in, std::int64_t n, std::uint8_t* __restrict out) {  // a loop GCC vectorizes
      for (std::int64_t i = 0; i < n; ++i) out[i] = in[i] ^ 0x80u;
    };
    for (std::int64_t r = 0; r < rows; ++r) offset(parts_[0].bytes.data() + r * cols, cols, codes.data() + r * packed);
    // The row scales are model-dtype values widened exactly: stored in that dtype.
    for (std::int64_t r = 0; r < rows; ++r) {
      float s;
      std::memcpy(&s, parts_[1].bytes.data() + r * 4, 4);
      const std::uint16_t h = m.type == st::dtype::BF16 ? fp8::to_bf16(s) : lp::to_fp16(s);
      scales.push_back(static_cast<std::uint8_t>(h & 0xFF));
      scales.push_back(static_cast<std::uint8_t>(h >> 8));
    }
  } else {
    std::swap(codes, parts_[0].bytes);  // the free buffer's memory comes back for the next chunk
    // A per-tensor scale is the unit's, the same in every chunk: stored once.
    if (f.group != per_tensor || scales.empty()) scales.insert(scales.end(), parts_[1].bytes.begin(), parts_[1].bytes.end());
  }
  sum_.bytes_out += codes.size();
  writer.write_codes();
}

float tensor_streamer::unit_amax(const tensor_ref& t, const member& m) {
  if (m.joint >= 0)
    if (const auto it = joint_amax_.find(m.joint); it != joint_amax_.end()) return it->second;
  // One pass over the unit (a joint unit's members, or the weight), NaN and infinity refused first.
  float amax = 0.0f;
  auto pass = [&](const tensor_ref& input, const member& x) {
    const std::size_t row_bytes = st::size_of(x.type) * static_cast<std::size_t>(x.cols);
    for_each_chunk(input, x, row_bytes, [&](std::span<const std::byte> bytes) {
      const input_view v{bytes.data(), element_of(x.type), static_cast<std::int64_t>(bytes.size() / row_bytes), x.cols};
      // The amax propagates NaN, and infinity is its own amax: a finite amax means finite values.
      const float a = cpu::weight_kernel<fp8_per_tensor>::amax(v, {options_.threads});
      if (!std::isfinite(a)) {
        std::vector<std::uint32_t> scratch;
        check_finite(x.stored ? input_view{decoded(x).data(), element_of(x.type), x.rows, x.cols} : view_of(input, scratch), weight_text(x));
      }
      amax = std::max(amax, a);
    });
  };
  if (m.joint < 0) {
    pass(t, m);
    return amax;
  }
  for (const auto& key : c_.units.joints[static_cast<std::size_t>(m.joint)]) pass(ck_.by_name.at(key), c_.units.members.at(key));
  joint_amax_[m.joint] = amax;
  return amax;
}

}  // namespace qpolicy::checkpoint_io
