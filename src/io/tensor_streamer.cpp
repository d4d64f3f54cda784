// `qpolicy quantize`'s streaming stage (checkpoint_stages.hpp): each tensor in row chunks, quantized
// (alone, or with the members of its joint unit) or copied, into the output file.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <span>

#include "checkpoint_stages.hpp"
#include "chunk_io.hpp"
#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"
#include "qpolicy/numerics/detail/hadamard.hpp"
#include "qpolicy/numerics/detail/quantize_blocks.hpp"
#include "qpolicy/numerics/block_formats.hpp"

namespace qpolicy::checkpoint_io {

namespace {

namespace st = safetensors;

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
