// What a quantized checkpoint stores for each module its method quantizes, checked against the
// tensors' headers (checkpoint_source.hpp, check_stored_tensors), and the weights those tensors stand
// for (weight_names_of). The layouts are the ones vLLM's create_weights registers for each method and
// compressed-tensors' compressors write.
#include <fmt/format.h>

#include <algorithm>

#include "qpolicy/config/config.hpp"
#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/source/checkpoint_source.hpp"

namespace qpolicy::source {

namespace {

using st = safetensors::dtype;

/// One tensor the format stores beside a module's name: `M.suffix`, its dtype (any of `types`) and shape
/// (any of `shapes`; a scalar and [1] are one value for a per-tensor scale).
struct part {
  std::string suffix;
  std::vector<st> types;
  std::vector<std::vector<std::int64_t>> shapes;
  std::string_view shape_text;  // the shape in terms of the codes' [N, K], for messages
};

std::string part_text(const part& p) {
  std::string types;
  for (std::size_t i = 0; i < p.types.size(); ++i) types += (i ? " or " : "") + std::string(safetensors::to_string(p.types[i]));
  return p.suffix + " " + types + " " + std::string(p.shape_text);
}

/// a / b rounded up, for a >= 0 and a divisor the config reader has proved positive.
std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  if (b <= 0) throw std::logic_error("a block or group size that is not positive reached the stored-tensor checks");
  return checked::ceil_div(a, b);
}

/// a * b of two header dimensions, or config_error naming the tensor when that leaves 64-bit sizes.
std::int64_t product(std::int64_t a, std::int64_t b, const std::string& tensor) {
  if (const auto p = checked::mul(a, b)) return *p;
  throw config_error("", fmt::format("tensor {} has a dimension of {}, which times {} leaves 64-bit sizes", text::py_repr(tensor), a, b));
}

/// The parts of one module under the checkpoint's format, given its codes' logical [N, K] (found from the
/// main tensor); empty when the format's layout is not one this build knows. Block scales count a partial
/// last block, as the decoders read them.
std::vector<part> module_parts(const checkpoint_source& s, const source_layer& decided, const config_group* g, std::int64_t n, std::int64_t k) {
  const std::vector<std::int64_t> one{1}, scalar{};
  switch (s.method) {
    case checkpoint_method::modelopt_mixed:
    case checkpoint_method::quark: {
      const part fp8_weight{"weight", {st::F8_E4M3}, {{n, k}}, "[N, K]"};
      switch (decided.layout) {
        case stored_layout::unknown: return {};
        case stored_layout::fp8_tensor: return {fp8_weight, {"weight_scale", {st::F32}, {one, scalar}, "[1] or []"}};
        case stored_layout::fp8_channel: return {fp8_weight, {"weight_scale", {st::F32}, {{n}, {n, 1}}, "[N]"}};
        case stored_layout::fp8_blocks:
          return {fp8_weight, {"weight_scale", {st::F32}, {{ceil_div(n, 128), ceil_div(k, 128)}}, "[N/128, K/128] (rounded up)"}};
        case stored_layout::fp8_blocks_4d:
          return {fp8_weight, {"weight_scale", {st::F32}, {{ceil_div(n, 128), 1, ceil_div(k, 128), 1}}, "[N/128, 1, K/128, 1] (rounded up)"}};
        case stored_layout::mxfp8: return {fp8_weight, {"weight_scale", {st::U8}, {{n, ceil_div(k, 32)}}, "[N, K/32]"}};
        case stored_layout::mxfp4:
          return {{"weight", {st::U8}, {{n, k / 2}}, "[N, K/2]"}, {"weight_scale", {st::U8}, {{n, ceil_div(k, 32)}}, "[N, K/32]"}};
        case stored_layout::nvfp4:
          return {{"weight", {st::U8}, {{n, k / 2}}, "[N, K/2]"}, {"weight_scale", {st::F8_E4M3}, {{n, ceil_div(k, s.group_size)}}, "[N, K/group_size]"},
                  {"weight_scale_2", {st::F32}, {one, scalar}, "[1] or []"}};
      }
      return {};
    }
    case checkpoint_method::fp8:
      if (s.weight_block_size)
        return {{"weight", {st::F8_E4M3}, {{n, k}}, "[N, K]"},
                {"weight_scale_inv", {st::F32}, {{ceil_div(n, (*s.weight_block_size)[0]), ceil_div(k, (*s.weight_block_size)[1])}}, "[N/bn, K/bk] (rounded up)"}};
      return {{"weight", {st::F8_E4M3}, {{n, k}}, "[N, K]"}, {"weight_scale", {st::F32}, {one, scalar}, "[1] or []"}};
    case checkpoint_method::modelopt_fp8:
      return {{"weight", {st::F8_E4M3}, {{n, k}}, "[N, K]"}, {"weight_scale", {st::F32}, {one, scalar}, "[1] or []"}};
    case checkpoint_method::modelopt_fp4:
      if (s.group_size <= 0) throw std::logic_error("a ModelOpt group_size that is not positive reached the stored-tensor checks");
      return {{"weight", {st::U8}, {{n, k / 2}}, "[N, K/2]"}, {"weight_scale", {st::F8_E4M3}, {{n, ceil_div(k, s.group_size)}}, "[N, K/group_size]"},
              {"weight_scale_2", {st::F32}, {one, scalar}, "[1] or []"}};
    case checkpoint_method::compressed_tensors: {
      if (!g) return {};
      const std::vector<st> floats{st::F32, st::BF16, st::F16};
      if (g->format == "nvfp4-pack-quantized")
        return {{"weight_packed", {st::U8}, {{n, k / 2}}, "[N, K/2]"}, {"weight_scale", {st::F8_E4M3}, {{n, ceil_div(k, 16)}}, "[N, K/16]"},
                {"weight_global_scale", {st::F32}, {one}, "[1]"}};
      if (g->format == "mxfp4-pack-quantized")
        return {{"weight_packed", {st::U8}, {{n, k / 2}}, "[N, K/2]"}, {"weight_scale", {st::U8}, {{n, ceil_div(k, 32)}}, "[N, K/32]"}};
      if (g->format == "mxfp8-quantized") return {{"weight", {st::F8_E4M3}, {{n, k}}, "[N, K]"}, {"weight_scale", {st::U8}, {{n, ceil_div(k, 32)}}, "[N, K/32]"}};
      if (g->format == "float-quantized") {
        std::vector<std::int64_t> scale{1};
        std::string_view scale_text = "[1]";
        if (g->strategy == "channel") scale = {n, 1}, scale_text = "[N, 1]";
        else if (g->strategy == "group" && g->group_size) scale = {n, ceil_div(k, *g->group_size)}, scale_text = "[N, K/group_size]";
        else if (g->strategy == "block" && g->block_structure)
          scale = {ceil_div(n, (*g->block_structure)[0]), ceil_div(k, (*g->block_structure)[1])}, scale_text = "[N/bn, K/bk] (rounded up)";
        return {{"weight", {st::F8_E4M3}, {{n, k}}, "[N, K]"}, {"weight_scale", floats, {scale}, scale_text}};
      }
      if (g->format == "pack-quantized" && (g->num_bits == 4 || g->num_bits == 8)) {
        const std::vector<std::int64_t> scale = g->strategy == "group" && g->group_size ? std::vector<std::int64_t>{n, ceil_div(k, *g->group_size)}
                                                                                         : std::vector<std::int64_t>{n, 1};
        return {{"weight_packed", {st::I32}, {{n, ceil_div(product(k, g->num_bits, "weight_packed"), 32)}}, "[N, K*bits/32]"},
                {"weight_scale", floats, {scale}, g->strategy == "group" ? "[N, K/group_size]" : "[N, 1]"},
                {"weight_shape", {st::I64, st::I32}, {{2}}, "[2]"}};
      }
      return {};
    }
    case checkpoint_method::mxfp4:
    case checkpoint_method::gpt_oss_mxfp4: break;  // the experts' fused blocks: checked per layer
  }
  return {};
}

/// ", in FILE" for a header that knows its file.
std::string stored_in(const tensor_header& t) { return t.file.empty() ? std::string() : ", in " + t.file; }

void fail(const std::string& module, const std::string& scheme, const std::vector<part>& parts, const std::string& problem) {
  std::string layout;
  for (std::size_t i = 0; i < parts.size(); ++i) layout += (i ? ", " : "") + part_text(parts[i]);
  throw config_error("", "the checkpoint's " + scheme + " stores " + module + " as " + layout + "; " + problem);
}

/// One module: its main tensor gives [N, K]; every part must be there as the format stores it.
void check_module(const checkpoint_source& s, const source_layer& decided, const config_group* g, const std::string& module,
                  const std::function<const tensor_header*(const std::string&)>& find) {
  // The main tensor's name and how its columns relate to K, from the format's parts at a nominal shape.
  const auto nominal = module_parts(s, decided, g, 2, 64);
  if (nominal.empty()) return;
  const auto main_name = module + "." + nominal.front().suffix;
  const auto* main = find(main_name);
  if (!main) fail(module, decided.scheme, nominal, "tensor " + text::py_repr(main_name) + " is missing");
  if (main->shape.size() != 2 || std::find(nominal.front().types.begin(), nominal.front().types.end(), main->type) == nominal.front().types.end())
    fail(module, decided.scheme, nominal,
         "tensor " + text::py_repr(main_name) + " is " + std::string(safetensors::to_string(main->type)) + " " + checked::shape_text(main->shape) +
             stored_in(*main));
  const std::int64_t n = main->shape[0];
  std::int64_t k = main->shape[1];
  const bool fp4_layout = decided.layout == stored_layout::nvfp4 || decided.layout == stored_layout::mxfp4;
  if ((nominal.front().suffix == "weight_packed" && main->type == st::U8) || s.method == checkpoint_method::modelopt_fp4 || fp4_layout)
    k = product(k, 2, main_name);
  if (main->type == st::I32 && g) k = product(main->shape[1], 32, main_name) / g->num_bits;  // at most; weight_shape holds the true K
  const auto parts = module_parts(s, decided, g, n, k);
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const auto& p = parts[i];
    const auto name = module + "." + p.suffix;
    const auto* t = find(name);
    if (!t) fail(module, decided.scheme, parts, "tensor " + text::py_repr(name) + " is missing");
    const bool type_ok = std::find(p.types.begin(), p.types.end(), t->type) != p.types.end();
    // Packed INT weights round K up to whole int32 words: their grouped scales follow weight_shape's K, which
    // this check does not read; their row count still has to agree.
    const bool shape_ok = std::find(p.shapes.begin(), p.shapes.end(), t->shape) != p.shapes.end() ||
                          (main->type == st::I32 && p.suffix == "weight_scale" && t->shape.size() == 2 && t->shape[0] == n);
    if (!type_ok || !shape_ok)
      fail(module, decided.scheme, parts,
           "tensor " + text::py_repr(name) + " is " + std::string(safetensors::to_string(t->type)) + " " + checked::shape_text(t->shape) +
               ", expected " + checked::shape_text(p.shapes.front()) + " for codes of [N, K] = " + checked::shape_text(std::vector<std::int64_t>{n, k}) +
               stored_in(*t));
  }
}

/// gpt-oss's experts: L.gate_up_proj_blocks [E, 2I, H/32, 16] with L.gate_up_proj_scales [E, 2I, H/32], and
/// L.down_proj_blocks [E, H, I/32, 16] with L.down_proj_scales [E, H, I/32].
void check_gpt_oss_experts(const source_layer& decided, const std::string& layer,
                           const std::function<const tensor_header*(const std::string&)>& find) {
  for (const char* proj : {"gate_up_proj", "down_proj"}) {
    const auto blocks = layer + "." + proj + "_blocks", scales = layer + "." + proj + "_scales";
    const auto* b = find(blocks);
    const std::string layout = std::string(proj) + "_blocks U8 [E, N, K/32, 16] and " + proj + "_scales U8 [E, N, K/32]";
    if (!b || b->type != st::U8 || b->shape.size() != 4 || b->shape[3] != 16)
      throw config_error("", "the checkpoint's " + decided.scheme + " stores " + layer + " as " + layout + "; tensor " + text::py_repr(blocks) +
                                 (b ? " is " + std::string(safetensors::to_string(b->type)) + " " + checked::shape_text(b->shape) + stored_in(*b) : " is missing"));
    const std::vector<std::int64_t> want{b->shape[0], b->shape[1], b->shape[2]};
    const auto* sc = find(scales);
    if (!sc || sc->type != st::U8 || sc->shape != want)
      throw config_error("", "the checkpoint's " + decided.scheme + " stores " + layer + " as " + layout + "; tensor " + text::py_repr(scales) +
                                 (sc ? " is " + std::string(safetensors::to_string(sc->type)) + " " + checked::shape_text(sc->shape) +
                                           ", expected U8 " + checked::shape_text(want) + stored_in(*sc)
                                     : " is missing"));
  }
}

}  // namespace

const config_group* decided_group(const checkpoint_source& s, const source_layer& decided) {
  if (s.method != checkpoint_method::compressed_tensors) return nullptr;
  for (const auto& g : s.groups)
    if (decided.rule.starts_with("config_groups." + g.name + " ")) return &g;
  return nullptr;
}

void check_stored_tensors(const checkpoint_source& s, const model_desc& model,
                          const std::function<const tensor_header*(const std::string&)>& find) {
  for (const auto& layer : model.layers) {
    const auto decided = s.decide(model, layer);
    if (!decided.quantized() || decided.error) continue;
    // gpt-oss's HF format fuses MXFP4 experts (mxfp4 methods, and Quark's OCP MX experts as gpt-oss stores
    // them); the mxfp4 methods' per-expert tensors are another MXFP4 layout, not checked.
    const bool mxfp4_method = s.method == checkpoint_method::mxfp4 || s.method == checkpoint_method::gpt_oss_mxfp4;
    const bool fused = find(layer.name + ".gate_up_proj_blocks") || !find(layer.name + ".0." + s.expert_projections[0] + ".weight");
    if ((mxfp4_method || (decided.cls == method_class::quark_ocp_mx_moe && decided.layout == stored_layout::mxfp4)) && fused) {
      check_gpt_oss_experts(decided, layer.name, find);
      continue;
    }
    if (mxfp4_method) continue;
    const auto* g = decided_group(s, decided);
    std::vector<std::string> modules;
    if (layer.kind == layer_kind::moe) {
      for (std::int64_t e = 0; e < layer.num_experts.value_or(0); ++e)
        for (const auto& p : s.expert_projections) modules.push_back(layer.name + "." + std::to_string(e) + "." + p);
    } else if (const auto* fused = model.fused_entry(layer.name)) {
      for (const auto& shard : fused->shards) modules.push_back(text::replace_all(layer.name, fused->fused, shard));
    } else {
      modules.push_back(layer.name);
    }
    for (const auto& m : modules) check_module(s, decided, g, m, find);
  }
}

std::vector<std::pair<std::string, std::vector<std::int64_t>>> weight_names_of(
    const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& tensors, const checkpoint_source& checkpoint) {
  // compressed-tensors names a transform `{module}.{scheme}_{location}` (transform/factory/base.py).
  auto is_transform = [&](const std::string& name) {
    const auto end = name.rfind('.');
    const auto start = end == std::string::npos ? std::string::npos : name.rfind('.', end - 1);
    const auto module = start == std::string::npos ? std::string() : name.substr(start + 1, end - start - 1);
    for (const auto& scheme : checkpoint.transform_schemes)
      for (std::string_view location : {"input", "output", "weight_input", "weight_output", "k_cache", "q_attn"})
        if (module == scheme + "_" + std::string(location)) return true;
    return false;
  };
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  for (const auto& [name, shape] : tensors) {
    if (is_transform(name)) continue;
    if (name.ends_with(".weight_packed")) {
      out.emplace_back(name.substr(0, name.size() - 7), shape);
      continue;
    }
    // gpt-oss: L.experts.gate_up_proj_blocks [E, 2I, K/32, 16] and L.experts.down_proj_blocks [E, H, I/32, 16].
    const bool fused_blocks = checkpoint.method == checkpoint_method::mxfp4 || checkpoint.method == checkpoint_method::gpt_oss_mxfp4 ||
                              checkpoint.method == checkpoint_method::quark;
    for (std::string_view fused : {".gate_up_proj_blocks", ".down_proj_blocks"}) {
      if (fused_blocks && name.ends_with(fused) && shape.size() != 4)
        throw config_error("", "tensor " + text::py_repr(name) + " has shape " + checked::shape_text(shape) +
                                   "; gpt-oss's MXFP4 expert blocks are [E, N, K/32, 16]");
      if (name.ends_with(fused) && shape.size() == 4) {
        const auto layer = name.substr(0, name.size() - fused.size());
        const auto blocks = checked::mul(shape[2], shape[3]);
        const auto k = blocks ? checked::mul(*blocks, std::int64_t{2}) : std::nullopt;
        if (!k) throw config_error("", "tensor " + text::py_repr(name) + " has shape " + checked::shape_text(shape) + ", beyond 64-bit sizes");
        // The first and the last expert: derive_model counts the experts from the largest index (and refuses
        // one past int32), so a header claiming 2^40 experts costs nothing here.
        std::vector<std::int64_t> experts{0};
        if (shape[0] > 1) experts.push_back(shape[0] - 1);
        for (const std::int64_t e : experts) {
          const auto base = layer + "." + std::to_string(e) + ".";
          if (fused == ".gate_up_proj_blocks") {
            out.emplace_back(base + "gate_proj.weight", std::vector<std::int64_t>{shape[1] / 2, *k});
            out.emplace_back(base + "up_proj.weight", std::vector<std::int64_t>{shape[1] / 2, *k});
          } else {
            out.emplace_back(base + "down_proj.weight", std::vector<std::int64_t>{shape[1], *k});
          }
        }
      }
    }
    if (name.ends_with(".weight")) out.emplace_back(name, shape);
  }
  return out;
}

}  // namespace qpolicy::source
