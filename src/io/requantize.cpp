// An already-quantized model directory as quantize's input (requantize.hpp): stored weights, their
// decode, and the kept layers' re-expression.
#include "requantize.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "checkpoint_format.hpp"
#include "chunk_io.hpp"
#include "qpolicy/config/config.hpp"
#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/kernels/cpu/dequantize.hpp"
#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::checkpoint_io {

namespace {

namespace json = boost::json;
namespace st = safetensors;
using source::checkpoint_method;
using schemes::formula;

const tensor_ref& tensor(const checkpoint& ck, const std::string& name, const std::string& module, const std::string& format) {
  const auto it = ck.by_name.find(name);
  if (it == ck.by_name.end())
    throw config_error("", "the checkpoint's " + format + " stores " + module + " with a tensor " + text::py_repr(name) + ", which is missing");
  return it->second;
}

/// A tensor's values widened to float32 (F32, BF16 or F16).
std::vector<float> floats_of(const tensor_ref& t) {
  std::vector<std::uint32_t> buffer;
  const auto bytes = read_tensor(t, buffer);
  const auto n = static_cast<std::size_t>(t.info->elements());
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (t.info->type == st::dtype::F32) {
      std::memcpy(&out[i], bytes.data() + i * 4, 4);
      continue;
    }
    std::uint16_t h;
    std::memcpy(&h, bytes.data() + i * 2, 2);
    out[i] = t.info->type == st::dtype::BF16 ? fp8::from_bf16(h) : fp8::from_fp16(h);
  }
  return out;
}

/// The FP8 decoder row of compressed-tensors' float-quantized strategy (8-bit float, symmetric).
std::optional<formula> float_quantized_formula(const source::config_group& g) {
  if (g.num_bits != 8 || g.weight_type != "float" || !g.symmetric) return std::nullopt;
  if (g.strategy == "tensor") return formula::fp8_per_tensor_static;
  if (g.strategy == "channel") return formula::fp8_per_channel_static;
  if (g.strategy == "block" && g.block_structure == std::array<std::int64_t, 2>{128, 128}) return formula::fp8_per_block_static;
  if (g.strategy == "group" && g.group_size == 128) return formula::fp8_per_block_dynamic;  // 1x128 groups along K
  return std::nullopt;
}

[[noreturn]] void no_decoder(const std::string& module, const std::string& layer, const std::string& format, const std::string& why) {
  throw config_error("", "layer " + layer + " is planned for requantization, but qpolicy has no decoder for its stored format (" + format +
                             " of " + module + "): " + why);
}

/// A kept Quark layer's config as the checkpoint has it (`entry`: its layer_quant_config key, "" for the
/// global config). The output's export names no KV-cache group, so an output spec vLLM would have cleared
/// for the KV cache is cleared here.
json::object quark_kept_config(const json::object& config, const std::string& entry) {
  auto out = entry.empty() ? config.at("global_quant_config").as_object() : config.at("layer_quant_config").at(entry).as_object();
  if (out.contains("output_tensors")) out["output_tensors"] = nullptr;
  return out;
}

/// A kept layer's quantized_layers entries, as the checkpoint has them: the one that decided it and every
/// one under its name (its shards, its experts' modules).
std::vector<std::pair<std::string, json::object>> modelopt_kept_entries(const json::object& config, const model_desc& model, const layer_desc& layer,
                                                                        const std::string& entry) {
  const auto* nested = config.if_contains("quantization");
  const auto& from = nested && nested->is_object() ? nested->get_object() : config;
  std::vector<std::string> names{layer.name};
  if (const auto* fused = model.fused_entry(layer.name))
    for (const auto& shard : fused->shards) names.push_back(text::replace_all(layer.name, fused->fused, shard));
  std::vector<std::pair<std::string, json::object>> out;
  for (const auto& [key, value] : from.at("quantized_layers").as_object()) {
    const std::string k(key);
    if (k == entry || std::find(names.begin(), names.end(), k) != names.end() || k.starts_with(layer.name + "."))
      out.emplace_back(k, value.as_object());
  }
  return out;
}

}  // namespace

std::span<const std::byte> read_tensor(const tensor_ref& t, std::vector<std::uint32_t>& into) {
  const auto range = t.file->data(*t.info);
  if (into.size() * 4 < range.size()) into.resize((range.size() + 3) / 4);
  auto* bytes = reinterpret_cast<std::byte*>(into.data());
  t.file->read(range, bytes);
  return {bytes, range.size()};
}

std::vector<std::string> stored_modules(const model_desc& model, const layer_desc& layer, const std::array<std::string, 3>& projections) {
  std::vector<std::string> out;
  if (layer.kind == layer_kind::moe) {
    for (std::int64_t e = 0; e < layer.num_experts.value_or(0); ++e)
      for (const auto& p : projections) out.push_back(layer.name + "." + std::to_string(e) + "." + p);
  } else if (const auto* fused = model.fused_entry(layer.name)) {
    for (const auto& shard : fused->shards) out.push_back(text::replace_all(layer.name, fused->fused, shard));
  } else {
    out.push_back(layer.name);
  }
  return out;
}

stored_weight stored_weight_of(const checkpoint& ck, const quantized_input& in, const source::source_layer& decided,
                               const std::string& module, const std::string& layer) {
  const auto& s = in.source;
  stored_weight w;
  w.module = module;
  w.format = decided.scheme;
  w.decoded_by_vllm = source::class_of(decided.cls).decode != source::decode_support::none;
  const auto m = module + ".";
  switch (s.method) {
    case checkpoint_method::fp8:
      if (!s.store_dtype.empty()) no_decoder(module, layer, w.format, "fp8 checkpoints storing " + s.store_dtype + " are not read");
      w.codes = m + "weight";
      if (s.weight_block_size) {
        if (*s.weight_block_size != std::array<std::int64_t, 2>{128, 128})
          no_decoder(module, layer, w.format, "the decoder reads 128x128 blocks, and weight_block_size is " + checked::shape_text(std::vector<std::int64_t>(s.weight_block_size->begin(), s.weight_block_size->end())));
        w.formula = formula::fp8_per_block_static;
        w.scales = m + "weight_scale_inv";
      } else {
        w.formula = formula::fp8_per_tensor_static;
        w.scales = m + "weight_scale";
      }
      break;
    case checkpoint_method::modelopt_fp8:
      w.formula = formula::fp8_per_tensor_static, w.codes = m + "weight", w.scales = m + "weight_scale";
      break;
    case checkpoint_method::modelopt_fp4:
      if (s.group_size != 16)
        no_decoder(module, layer, w.format, "the NVFP4 decoder reads groups of 16, and group_size is " + std::to_string(s.group_size));
      w.formula = formula::nvfp4_weight, w.codes = m + "weight", w.scales = m + "weight_scale", w.second = m + "weight_scale_2";
      break;
    case checkpoint_method::compressed_tensors: {
      const auto* g = source::decided_group(s, decided);
      if (!g) no_decoder(module, layer, w.format, "no config group decided it");
      const auto where = "config group " + g->name + " (format " + g->format + ")";
      if (g->format == "float-quantized") {
        const auto f = float_quantized_formula(*g);
        if (!f)
          no_decoder(module, layer, where, "the decoders read symmetric 8-bit float weights per tensor, per channel, in 128x128 blocks or 1x128 groups");
        w.formula = *f, w.codes = m + "weight", w.scales = m + "weight_scale";
      } else if (g->format == "mxfp8-quantized") {
        w.formula = formula::mxfp8_torch, w.codes = m + "weight", w.scales = m + "weight_scale";
      } else if (g->format == "mxfp4-pack-quantized") {
        w.formula = formula::mxfp4_even, w.codes = m + "weight_packed", w.scales = m + "weight_scale";
      } else if (g->format == "nvfp4-pack-quantized") {
        w.formula = formula::nvfp4_weight, w.codes = m + "weight_packed", w.scales = m + "weight_scale";
        w.second = m + "weight_global_scale", w.invert_second = true;
      } else if (g->format == "pack-quantized" && g->num_bits == 8 && g->weight_type == "int" && g->strategy == "channel" && g->symmetric) {
        w.formula = formula::int8_per_channel, w.codes = m + "weight_packed", w.scales = m + "weight_scale", w.int8_words = true;
      } else {
        no_decoder(module, layer, where, "the decoders read float-quantized, mxfp8-quantized, mxfp4-pack-quantized, nvfp4-pack-quantized and "
                                         "8-bit symmetric per-channel pack-quantized weights");
      }
      w.format = where;
      break;
    }
    case checkpoint_method::mxfp4:
    case checkpoint_method::gpt_oss_mxfp4:
      no_decoder(module, layer, w.format, "gpt-oss's fused expert blocks are planned, not yet converted");
    case checkpoint_method::modelopt_mixed:
    case checkpoint_method::quark:
      // The layer's own config named the layout; ModelOpt's 4-D block scales hold the 2-D grid's bytes.
      w.codes = m + "weight", w.scales = m + "weight_scale";
      switch (decided.layout) {
        case source::stored_layout::fp8_tensor: w.formula = formula::fp8_per_tensor_static; break;
        case source::stored_layout::fp8_channel: w.formula = formula::fp8_per_channel_static; break;
        case source::stored_layout::fp8_blocks:
        case source::stored_layout::fp8_blocks_4d: w.formula = formula::fp8_per_block_static; break;
        case source::stored_layout::mxfp8: w.formula = formula::mxfp8_torch; break;
        case source::stored_layout::mxfp4:
          if (decided.cls == source::method_class::quark_ocp_mx_moe)
            no_decoder(module, layer, w.format, "gpt-oss's fused expert blocks are planned, not yet converted");
          w.formula = formula::mxfp4_even;
          break;
        case source::stored_layout::nvfp4:
          if (s.group_size != 16)
            no_decoder(module, layer, w.format, "the NVFP4 decoder reads groups of 16, and group_size is " + std::to_string(s.group_size));
          w.formula = formula::nvfp4_weight, w.second = m + "weight_scale_2";
          break;
        case source::stored_layout::unknown: no_decoder(module, layer, w.format, "the decoders do not read this layout");
      }
      break;
  }
  const auto& codes = tensor(ck, w.codes, module, w.format).info->shape;
  tensor(ck, w.scales, module, w.format);
  if (!w.second.empty()) tensor(ck, w.second, module, w.format);
  if (codes.size() != 2) throw config_error("", "tensor " + text::py_repr(w.codes) + " is " + checked::shape_text(codes) + "; expected 2-D codes");
  w.rows = codes[0];
  const auto& f = schemes::formula_of(w.formula);
  w.cols = f.codes == schemes::code_format::e2m1_packed ? codes[1] * 2 : codes[1];
  if (w.int8_words) {
    // weight_shape holds the unpacked [N, K]; the words round K up to a multiple of 4.
    const auto& shape_t = tensor(ck, m + "weight_shape", module, w.format);
    const auto bytes = shape_t.file->data(*shape_t.info);
    std::int64_t v[2] = {};
    for (int i = 0; i < 2 && shape_t.info->elements() == 2; ++i) {
      if (shape_t.info->type == st::dtype::I64) std::memcpy(&v[i], bytes.data() + i * 8, 8);
      else {
        std::int32_t x;
        std::memcpy(&x, bytes.data() + i * 4, 4);
        v[i] = x;
      }
    }
    if (v[0] != codes[0] || v[1] <= 0 || (v[1] + 3) / 4 != codes[1])
      throw config_error("", "tensor " + text::py_repr(m + "weight_shape") + " says " + checked::shape_text(std::vector<std::int64_t>{v[0], v[1]}) +
                                 ", which the packed words " + checked::shape_text(codes) + " of " + text::py_repr(w.codes) + " do not hold");
    w.cols = v[1];
    // The per-channel decoder reads one scale a row; the header check lets grouped scales' columns follow
    // weight_shape, so the row scales are checked here.
    const auto& scale_shape = tensor(ck, w.scales, module, w.format).info->shape;
    if (scale_shape != std::vector<std::int64_t>{w.rows, 1})
      throw config_error("", "tensor " + text::py_repr(w.scales) + " is " + checked::shape_text(scale_shape) + "; the per-channel INT8 decoder reads " +
                                 checked::shape_text(std::vector<std::int64_t>{w.rows, 1}) + " for codes of [N, K] = " +
                                 checked::shape_text(std::vector<std::int64_t>{w.rows, w.cols}));
  }
  return w;
}

void decode_weight(const checkpoint& ck, const stored_weight& w, read_buffers& buffers, element out_type, std::vector<std::uint32_t>& out,
                   unsigned threads) {
  const auto& f = schemes::formula_of(w.formula);
  const auto& codes_t = ck.by_name.at(w.codes);
  // Codes of up to a chunk are read as one chunk, taking the read ahead of them made while the tensor
  // before was worked on; larger ones are read whole into a buffer of their own (the streaming
  // buffers keep their size).
  const auto size = codes_t.file->data(*codes_t.info).size();
  std::vector<std::uint32_t> own;
  std::optional<chunk_reader> reader;
  if (size <= static_cast<std::size_t>(chunk_bytes)) reader.emplace(codes_t, std::max<std::size_t>(1, size), buffers);
  const auto code_bytes = reader ? reader->next() : read_tensor(codes_t, own);
  std::vector<std::uint8_t> codes;
  if (w.int8_words) {
    // pack_to_int32 at 8 bits: code + 128 in byte i of each little-endian int32.
    const auto words = codes_t.info->shape[1] * 4;
    codes.resize(static_cast<std::size_t>(w.rows * w.cols));
    for (std::int64_t r = 0; r < w.rows; ++r)
      for (std::int64_t k = 0; k < w.cols; ++k)
        codes[static_cast<std::size_t>(r * w.cols + k)] = static_cast<std::uint8_t>(code_bytes[static_cast<std::size_t>(r * words + k)]) ^ 0x80u;
  }
  const auto& scales_t = ck.by_name.at(w.scales);
  std::vector<float> float_scales;
  std::vector<std::uint32_t> scale_bytes;
  const void* scales = read_tensor(scales_t, scale_bytes).data();
  if (f.scales == schemes::scale_format::f32) {
    float_scales = floats_of(scales_t);
    scales = float_scales.data();
  }
  float second = 1.0f;
  if (!w.second.empty()) {
    second = floats_of(ck.by_name.at(w.second)).at(0);
    // vLLM's dequantize_nvfp4_moe_weights: 1.0 / weight_global_scale, in float32.
    if (w.invert_second) second = 1.0f / second;
  }
  cpu::stored_tensors in;
  in.codes = w.int8_words ? codes.data() : reinterpret_cast<const std::uint8_t*>(code_bytes.data());
  in.scales = scales;
  in.second = &second;
  in.rows = w.rows;
  in.cols = w.cols;
  const std::size_t width = out_type == element::f32 ? 4 : 2;
  out.resize((static_cast<std::size_t>(w.rows * w.cols) * width + 3) / 4);
  cpu::dequantize(w.formula, in, out_type, out.data(), {threads});
}

std::vector<std::string> replaced_tensors(const checkpoint& ck, const stored_weight& w) {
  std::vector<std::string> out{w.codes, w.scales};
  if (!w.second.empty()) out.push_back(w.second);
  const auto m = w.module + ".";
  for (const char* suffix : {"weight_shape", "weight_zero_point", "input_scale", "input_global_scale", "input_zero_point"})
    if (ck.by_name.count(m + suffix)) out.push_back(m + suffix);
  return out;
}

kept_layers keep_layers(const checkpoint& ck, const quantized_input& in, const model_desc& model, const composed_plan& p,
                        checkpoint_format requested) {
  kept_layers out;
  const auto& s = in.source;
  std::map<std::string, std::vector<std::string>> targets;  // group name -> kept modules
  std::vector<std::string> order;                           // group names, in the checkpoint's order
  auto target = [&](const std::string& group, const std::vector<std::string>& modules) {
    if (!targets.count(group)) order.push_back(group);
    auto& t = targets[group];
    t.insert(t.end(), modules.begin(), modules.end());
  };
  bool renamed_scales = false;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& c = p.layers[i];
    if (c.failed() || c.kind != composition::kept) continue;
    const auto& layer = model.layers[i];
    const auto names = layer_module_names(model, layer, true);
    switch (s.method) {
      case checkpoint_method::compressed_tensors:
        target(source::decided_group(s, c.checkpoint)->name, names);
        break;
      case checkpoint_method::quark:
      case checkpoint_method::modelopt_mixed: {
        const bool quark = s.method == checkpoint_method::quark;
        if (requested == checkpoint_format::compressed_tensors)
          throw config_error("", "layer " + layer.name + " stays in the checkpoint's " + c.checkpoint.scheme + ", which quantize keeps in the " +
                                     (quark ? "Quark" : "ModelOpt MIXED_PRECISION") + " config it came from; --format compressed-tensors "
                                     "cannot hold it as stored (leave --format out)");
        out.format = quark ? checkpoint_format::quark : checkpoint_format::modelopt;
        if (quark)
          for (const auto& name : layer_module_names(model, layer, false)) out.groups.emplace_back(name, quark_kept_config(in.config, c.checkpoint.entry));
        else
          for (auto& entry : modelopt_kept_entries(in.config, model, layer, c.checkpoint.entry)) out.groups.push_back(std::move(entry));
        break;
      }
      case checkpoint_method::fp8:
      case checkpoint_method::modelopt_fp8:
        // vLLM's fp8 blocks keep their scales as weight_scale_inv; compressed-tensors names a block scale
        // weight_scale (the same dequantization multiplier, so the bytes stay).
        if (s.weight_block_size)
          for (const auto& module : stored_modules(model, layer, s.expert_projections))
            if (ck.by_name.count(module + ".weight_scale_inv")) {
              out.renamed[module + ".weight_scale_inv"] = module + ".weight_scale";
              renamed_scales = true;
            }
        target("group_0", names);
        break;
      case checkpoint_method::gpt_oss_mxfp4:
        // Only Quark's config holds the fused blocks as stored beside quantized linear layers in vLLM.
        if (requested != checkpoint_format::compressed_tensors) {
          out.format = checkpoint_format::quark;
          out.groups.emplace_back(layer.name, quark_mxfp4_experts_config());
          break;
        }
        [[fallthrough]];
      case checkpoint_method::modelopt_fp4:
        // ModelOpt's own MIXED_PRECISION config holds them as stored, each module with its algo.
        if (s.method == checkpoint_method::modelopt_fp4 && requested != checkpoint_format::compressed_tensors) {
          out.format = checkpoint_format::modelopt;
          for (const auto& module : stored_modules(model, layer, s.expert_projections))
            out.groups.emplace_back(module, modelopt_nvfp4_entry(s.group_size));
          break;
        }
        [[fallthrough]];
      case checkpoint_method::mxfp4:
        throw config_error("", "layer " + layer.name + " stays in the checkpoint's " + c.checkpoint.scheme +
                                   ", which a compressed-tensors checkpoint cannot hold byte for byte (" +
                                   (s.method == checkpoint_method::modelopt_fp4
                                        ? std::string("it stores the encode scale 1/weight_scale_2 as weight_global_scale")
                                        : std::string("it stores each expert's weights, not gpt-oss's fused blocks")) +
                                   "); quantize does not convert this checkpoint yet: `qpolicy plan --model-dir` shows what vLLM does with it");
    }
  }
  if (out.format == checkpoint_format::modelopt && s.method == checkpoint_method::modelopt_mixed)
    out.notes.push_back("kept: the MIXED_PRECISION checkpoint's layers stay as stored, byte for byte, each with its quantized_layers entry");
  else if (out.format == checkpoint_format::quark && s.method == checkpoint_method::quark)
    out.notes.push_back("kept: the Quark checkpoint's layers stay as stored, byte for byte, each named in layer_quant_config with the config "
                        "that decided it");
  else if (out.format == checkpoint_format::modelopt)
    out.notes.push_back("kept: the ModelOpt NVFP4 layers stay as stored, byte for byte; the quantization_config is ModelOpt's "
                        "MIXED_PRECISION (quantized_layers names each module's algo), which vLLM reads them with beside the online layers");
  else if (out.format == checkpoint_format::quark)
    out.notes.push_back("kept: gpt-oss's MXFP4 experts stay in their fused *_blocks/*_scales tensors, byte for byte; the "
                        "quantization_config is Quark's (quant_method quark), the one vLLM's gpt-oss loader reads those tensors with "
                        "beside quantized linear layers (transformers reads Quark checkpoints only through the amd-quark package)");
  if (renamed_scales)
    out.notes.push_back("kept: the fp8 checkpoint's 128x128 block scales are renamed weight_scale_inv -> weight_scale, the name "
                        "compressed-tensors gives a block scale (the bytes are unchanged)");
  for (const auto& name : order) {
    json::object group;
    if (s.method == checkpoint_method::compressed_tensors) {
      group = in.config.at("config_groups").as_object().at(name).as_object();
      // A group without its own format takes the config's, which a mixed-precision config no longer says.
      if (const auto* f = group.if_contains("format"); !f || f->is_null())
        if (const auto* top = in.config.if_contains("format"); top && top->is_string()) group["format"] = *top;
    } else {
      // vLLM's fp8 method: blocks with dynamic 1xblock activation groups, or per-tensor weights with
      // dynamic (or, with stored input_scale, static) per-tensor activations; ModelOpt FP8 is static.
      const auto* scheme = in.config.if_contains("activation_scheme");
      const bool dynamic = s.method == checkpoint_method::fp8 && !(scheme && scheme->is_string() && scheme->get_string() == "static");
      group["format"] = "float-quantized";
      if (s.weight_block_size) {
        group["input_activations"] = fp8_quant_args("group", true, (*s.weight_block_size)[1]);
        group["weights"] = fp8_quant_args("block", false, std::nullopt, *s.weight_block_size);
      } else {
        group["input_activations"] = fp8_quant_args("tensor", dynamic);
        group["weights"] = fp8_quant_args("tensor", false);
      }
      group["output_activations"] = nullptr;
    }
    json::array t;
    for (const auto& m : targets[name]) t.emplace_back(m);
    group["targets"] = std::move(t);
    out.groups.emplace_back(name, std::move(group));
  }
  if (s.method == checkpoint_method::compressed_tensors && !order.empty())
    out.notes.push_back("kept: the checkpoint's config groups " + text::py_repr_list(order) +
                        " keep their arguments, their targets narrowed to the modules they still quantize");
  return out;
}

}  // namespace qpolicy::checkpoint_io
