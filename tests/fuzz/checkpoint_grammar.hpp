#pragma once
// The structured grammar of checkpoint_source_fuzz.cpp: bytes as choices that build an already-quantized
// checkpoint. Choice 0 is always the well-formed one (an input that runs out reads zeros), so a seed of
// a method byte and zeros is that method's valid checkpoint, and each mutated byte damages one thing: a
// field of the quantization_config given a value a reader must refuse or take (0, -1, 2^63 - 1, a
// string, a float, a list of the wrong length, ...), a module stored in another method's layout, or one
// tensor dropped, retyped or reshaped, or the file truncated.
#include <boost/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "grammar_basics.hpp"
#include "per_layer_grammar.hpp"

namespace qpolicy::fuzz {

inline json::object fp8_config(choices& c) {
  json::object o{{"quant_method", "fp8"}};
  field(c, o, "activation_scheme", "dynamic", {"static", "sometimes", 5});
  switch (c.pick(7)) {
    case 0: o["weight_block_size"] = json::array{int_field(c, 128), int_field(c, 128)}; break;
    case 1: break;
    case 2: o["weight_block_size"] = nullptr; break;
    case 3: o["weight_block_size"] = json::array{128}; break;
    case 4: o["weight_block_size"] = json::array{128, 128, 1}; break;
    case 5: o["weight_block_size"] = "128"; break;
    default: o["weight_block_size"] = int_field(c, 128); break;
  }
  field(c, o, "ignored_layers", name_list(c));
  field(c, o, "modules_to_not_convert", json::array{}, {name_list(c)});
  switch (c.pick(4)) {
    case 1: o["store_dtype"] = "mxfp4"; break;
    case 2: o["store_dtype"] = 5; break;
    case 3: o["store_dtype"] = nullptr; break;
    default: break;
  }
  return o;
}

/// compressed-tensors' formats, the first five with their natural weight arguments.
inline constexpr const char* ct_formats[] = {"nvfp4-pack-quantized", "float-quantized", "mxfp4-pack-quantized", "mxfp8-quantized",
                                             "pack-quantized", "naive-quantized", "int-quantized"};

/// A QuantizationArgs object: the format's natural arguments, each field possibly damaged.
inline json::value quant_args(choices& c, unsigned format, bool weights) {
  struct natural { std::int64_t bits; const char* type; const char* strategy; std::int64_t group; };
  static constexpr natural naturals[] = {{4, "float", "tensor_group", 16}, {8, "float", "channel", 0}, {4, "float", "group", 32},
                                         {8, "float", "group", 32},  {8, "int", "channel", 0}};
  const auto n = naturals[format < 5 ? format : 1];
  if (c.pick(16) == 15) return c.pick(2) ? json::value(5) : json::value("x");
  json::object a;
  a["num_bits"] = int_field(c, n.bits);
  field(c, a, "type", n.type, {"INT", "fp", 7});
  field(c, a, "strategy", weights ? n.strategy : (n.group ? "tensor_group" : "token"), {"tensor", "block", "token", "bogus", 3, "GROUP"});
  if (n.group) a["group_size"] = int_field(c, n.group);
  else field(c, a, "group_size", -1, {int_field(c, 128)});
  switch (c.pick(8)) {
    case 1: a["block_structure"] = json::array{int_field(c, 128), int_field(c, 128)}; break;
    case 2: a["block_structure"] = "128x128"; break;
    case 3: a["block_structure"] = "0x128"; break;
    case 4: a["block_structure"] = json::array{128}; break;
    default: break;
  }
  field(c, a, "dynamic", !weights, {"local", "sometimes", 1});
  field(c, a, "symmetric", true, {false, "yes"});
  if (format == 3 && weights) field(c, a, "scale_dtype", "torch.uint8", {5});
  return a;
}

inline json::object compressed_tensors_config(choices& c) {
  json::object o{{"quant_method", "compressed-tensors"}};
  const unsigned format = c.pick(7);
  field(c, o, "format", ct_formats[format], {5, "bogus"});
  field(c, o, "ignore", json::array{"lm_head", "re:.*mlp.gate$"}, {name_list(c)});
  json::object groups;
  const unsigned count = 1 + c.pick(2);
  for (unsigned g = 0; g < count; ++g) {
    json::object group;
    field(c, group, "targets", json::array{"Linear"}, {json::array{"re:.*experts.*"}, json::array{"re:.*self_attn.*"}, json::array{"LlamaAttention"},
                                                       "Linear", json::array{5}});
    if (c.pick(4) == 3) group["format"] = ct_formats[c.pick(7)];
    switch (c.pick(6)) {
      case 0: group["weights"] = quant_args(c, format, true); break;
      case 1: break;
      case 2: group["weights"] = nullptr; break;
      default: group["weights"] = quant_args(c, c.pick(5), true); break;
    }
    if (c.pick(3) == 1) group["input_activations"] = quant_args(c, format, false);
    groups["group_" + std::to_string(g)] = c.pick(16) == 15 ? json::value(7) : json::value(std::move(group));
  }
  switch (c.pick(8)) {
    case 0: o["config_groups"] = std::move(groups); break;
    case 1: break;
    case 2: o["config_groups"] = json::array{}; break;
    default: o["config_groups"] = std::move(groups); break;
  }
  switch (c.pick(8)) {
    case 1: o["transform_config"] = json::object{{"config_groups", json::object{{"v", json::object{}}}}}; break;
    case 2: o["transform_config"] = 5; break;
    case 3: o["transform_config"] = json::object{{"config_groups", 5}}; break;
    case 4: o["transform_config"] = json::object{}; break;
    default: break;
  }
  return o;
}

inline json::object modelopt_config(choices& c, bool nvfp4) {
  json::object o{{"quant_method", c.pick(4) == 3 ? "modelopt_fp4" : "modelopt"}};
  json::object q;
  field(c, q, "quant_algo", nvfp4 ? "NVFP4" : "FP8", {"nvfp4", "MXFP8", 7, "", "MIXED_PRECISION"});
  if (nvfp4) q["group_size"] = int_field(c, 16);
  else field(c, q, "group_size", 128, {int_field(c, 16)});
  field(c, q, "kv_cache_quant_algo", "FP8", {5});
  const bool nested = c.pick(3) != 2;
  field(c, q, nested ? "exclude_modules" : "ignore", json::array{"lm_head"}, {name_list(c)});
  if (!nested) {
    for (auto& [k, v] : q) o[k] = v;
    return o;
  }
  o["quantization"] = c.pick(16) == 15 ? json::value("x") : json::value(std::move(q));
  return o;
}

/// The quantization_config of a method whose config gives every module one layout.
inline json::value quantization_config_of(choices& c, method_draw method) {
  switch (method) {
    case method_draw::fp8: return fp8_config(c);
    case method_draw::compressed_tensors: return compressed_tensors_config(c);
    case method_draw::mxfp4: return json::object{{"quant_method", c.pick(2) ? "gpt_oss_mxfp4" : "mxfp4"}};
    case method_draw::modelopt_fp8: return modelopt_config(c, false);
    case method_draw::modelopt_nvfp4: return modelopt_config(c, true);
    default: break;
  }
  switch (c.pick(5)) {
    case 0: return json::object{{"quant_method", "gptq"}, {"bits", 4}};
    case 1: return json::object{{"quant_method", 5}};
    case 2: return json::object{{"bits", 4}};
    case 3: return json::array{"not", "an", "object"};
    default: return json::object{{"quant_method", "awq"}, {"bits", 4}};
  }
}

/// The layout `method`'s config gives a module.
inline layout natural_layout(method_draw method, const json::value& qc) {
  const auto* o = qc.if_object();
  switch (method) {
    case method_draw::fp8: return o && o->contains("weight_block_size") && !o->at("weight_block_size").is_null() ? layout::fp8_block : layout::fp8_tensor;
    case method_draw::compressed_tensors: {
      const auto* f = o ? o->if_contains("format") : nullptr;
      const std::string_view format = f && f->is_string() ? std::string_view(f->get_string()) : "";
      if (format == "nvfp4-pack-quantized") return layout::ct_nvfp4;
      if (format == "mxfp4-pack-quantized") return layout::ct_mxfp4;
      if (format == "mxfp8-quantized") return layout::ct_mxfp8;
      if (format == "pack-quantized") return layout::ct_pack_int8;
      return layout::ct_float;
    }
    case method_draw::modelopt_fp8: return layout::modelopt_fp8;
    case method_draw::modelopt_nvfp4: return layout::modelopt_nvfp4;
    default: return layout::bf16;
  }
}

/// The quantization_config of `method`, and the layouts it gives the modules.
inline json::value quantization_config(choices& c, method_draw method, natural_layouts& natural) {
  if (method == method_draw::quark) {
    const unsigned attention = c.pick(quark_attention_kinds);
    const bool mxfp4_experts = c.pick(4) != 3;
    natural = {quark_layout(attention), mxfp4_experts ? layout::bf16 : layout::fp8_tensor, mxfp4_experts};
    return quark_config(c, attention, mxfp4_experts);
  }
  if (method == method_draw::modelopt_mixed) {
    const unsigned linear = c.pick(6), experts = c.pick(6);
    natural = {mixed_algos[linear].linear, mixed_algos[experts].experts, false};
    return modelopt_mixed_config(c, linear, experts);
  }
  auto qc = quantization_config_of(c, method);
  natural = {natural_layout(method, qc), natural_layout(method, qc), method == method_draw::mxfp4};
  return qc;
}

/// The tensors of module `m` [n, k] stored as `l`.
inline void module_tensors(choices& c, const std::string& m, std::int64_t n, std::int64_t k, layout l, std::vector<stored_tensor>& out) {
  const auto scale = std::vector<std::int64_t>{1};
  switch (l) {
    case layout::natural:
    case layout::count:
    case layout::bf16: out.push_back({m + ".weight", st::BF16, {n, k}, {}}); break;
    case layout::fp8_tensor: out.push_back({m + ".weight", st::F8_E4M3, {n, k}, {}}), out.push_back({m + ".weight_scale", st::F32, scale, {}}); break;
    case layout::fp8_block:
      out.push_back({m + ".weight", st::F8_E4M3, {n, k}, {}});
      out.push_back({m + ".weight_scale_inv", st::F32, {(n + 127) / 128, (k + 127) / 128}, {}});
      break;
    case layout::ct_float: {
      out.push_back({m + ".weight", st::F8_E4M3, {n, k}, {}});
      const std::vector<std::int64_t> shapes[] = {{n, 1}, {1}, {(n + 127) / 128, (k + 127) / 128}, {n, k / 128 + (k % 128 != 0)}};
      out.push_back({m + ".weight_scale", c.pick(4) == 3 ? st::BF16 : st::F32, shapes[c.pick(4)], {}});
      break;
    }
    case layout::ct_nvfp4:
      out.push_back({m + ".weight_packed", st::U8, {n, k / 2}, {}});
      out.push_back({m + ".weight_scale", st::F8_E4M3, {n, k / 16}, {}});
      out.push_back({m + ".weight_global_scale", st::F32, {1}, {}});
      break;
    case layout::ct_mxfp4:
      out.push_back({m + ".weight_packed", st::U8, {n, k / 2}, {}});
      out.push_back({m + ".weight_scale", st::U8, {n, k / 32}, {}});
      break;
    case layout::ct_mxfp8:
      out.push_back({m + ".weight", st::F8_E4M3, {n, k}, {}});
      out.push_back({m + ".weight_scale", st::U8, {n, k / 32}, {}});
      break;
    case layout::ct_pack_int8:
      out.push_back({m + ".weight_packed", st::I32, {n, k / 4}, {}});
      out.push_back({m + ".weight_scale", st::BF16, {n, 1}, {}});
      out.push_back({m + ".weight_shape", c.pick(4) == 3 ? st::I32 : st::I64, {2}, {n, c.pick(4) == 3 ? k + 4 : k}});
      break;
    case layout::modelopt_fp8:
      out.push_back({m + ".weight", st::F8_E4M3, {n, k}, {}});
      out.push_back({m + ".weight_scale", st::F32, scale, {}});
      out.push_back({m + ".input_scale", st::F32, scale, {}});
      break;
    case layout::fp8_channel_rows:
      out.push_back({m + ".weight", st::F8_E4M3, {n, k}, {}});
      out.push_back({m + ".weight_scale", st::F32, {n}, {}});
      break;
    case layout::fp8_blocks_4d:
      out.push_back({m + ".weight", st::F8_E4M3, {n, k}, {}});
      out.push_back({m + ".weight_scale", st::F32, {(n + 127) / 128, 1, (k + 127) / 128, 1}, {}});
      break;
    case layout::fp8_blocks_grid:
      out.push_back({m + ".weight", st::F8_E4M3, {n, k}, {}});
      out.push_back({m + ".weight_scale", st::F32, {(n + 127) / 128, (k + 127) / 128}, {}});
      break;
    case layout::mxfp4_weight:
      out.push_back({m + ".weight", st::U8, {n, k / 2}, {}});
      out.push_back({m + ".weight_scale", st::U8, {n, k / 32}, {}});
      break;
    case layout::modelopt_nvfp4:
      out.push_back({m + ".weight", st::U8, {n, k / 2}, {}});
      out.push_back({m + ".weight_scale", st::F8_E4M3, {n, k / 16}, {}});
      out.push_back({m + ".weight_scale_2", st::F32, scale, {}});
      out.push_back({m + ".input_scale", st::F32, scale, {}});
      break;
  }
}

/// Damages one tensor with a small chance: drops it, retypes it, or reshapes it.
inline bool damaged(choices& c, stored_tensor& t) {
  switch (c.pick(48)) {
    case 1: return true;  // dropped
    case 2: t.type = static_cast<st>(c.pick(15)); break;
    case 3: if (!t.shape.empty()) t.shape[0] += 1; break;
    case 4: if (!t.shape.empty()) t.shape.back() = t.shape.back() > 1 ? t.shape.back() - 1 : 0; break;
    case 5: t.shape.push_back(1); break;
    case 6: t.shape.clear(); break;
    case 7: if (!t.shape.empty()) t.shape[0] = 0; break;
    case 8: if (!t.shape.empty()) t.shape.back() = std::int64_t{1} << 40; break;
    default: break;
  }
  return false;
}

/// The model: embeddings, `layers` blocks of attention and a dense MLP or `experts` experts (gpt-oss's
/// fused blocks for an MXFP4 checkpoint), the LM head; every module stored as the method's config gives
/// it, or in another layout.
inline void model_tensors(choices& c, const natural_layouts& natural, std::vector<stored_tensor>& out) {
  // Small by default (each input is written and decoded; the stored layouts take any size), wider ones
  // for the online formats that need 128-wide blocks.
  static constexpr std::int64_t hiddens[] = {32, 128, 64, 256}, intermediates[] = {32, 128, 64};
  const std::int64_t h = hiddens[c.pick(4)], inter = intermediates[c.pick(3)];
  const unsigned layers = 1 + c.pick(2), experts = c.pick(3) == 1 ? 0 : 2 + c.pick(2);
  auto chosen = [&](bool expert = false) {
    const unsigned n = c.pick(32);
    return n < 28 ? (expert ? natural.experts : natural.linear) : static_cast<layout>(1 + c.pick(static_cast<unsigned>(layout::count) - 1));
  };
  std::vector<stored_tensor> all{{"model.embed_tokens.weight", st::BF16, {256, h}, {}}};
  for (unsigned l = 0; l < layers; ++l) {
    const auto p = "model.layers." + std::to_string(l) + ".";
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"})
      module_tensors(c, p + "self_attn." + proj, h, h, chosen(), all);
    if (!experts) {
      for (const char* proj : {"gate_proj", "up_proj", "down_proj"})
        module_tensors(c, p + "mlp." + proj, proj[0] == 'd' ? h : inter, proj[0] == 'd' ? inter : h, chosen(), all);
      continue;
    }
    all.push_back({p + "mlp.gate.weight", st::BF16, {experts, h}, {}});
    if (natural.fused_experts && c.pick(8) != 7) {
      const std::int64_t e = experts;
      all.push_back({p + "mlp.experts.gate_up_proj_blocks", st::U8, {e, 2 * inter, h / 32, 16}, {}});
      all.push_back({p + "mlp.experts.gate_up_proj_scales", st::U8, {e, 2 * inter, h / 32}, {}});
      all.push_back({p + "mlp.experts.gate_up_proj_bias", st::BF16, {e, 2 * inter}, {}});
      all.push_back({p + "mlp.experts.down_proj_blocks", st::U8, {e, h, inter / 32, 16}, {}});
      all.push_back({p + "mlp.experts.down_proj_scales", st::U8, {e, h, inter / 32}, {}});
      continue;
    }
    for (unsigned e = 0; e < experts; ++e) {
      const auto l_e = chosen(true);
      for (const char* proj : {"gate_proj", "up_proj", "down_proj"})
        module_tensors(c, p + "mlp.experts." + std::to_string(e) + "." + proj, proj[0] == 'd' ? h : inter, proj[0] == 'd' ? inter : h, l_e, all);
    }
  }
  all.push_back({"model.norm.weight", st::BF16, {h}, {}});
  all.push_back({"lm_head.weight", st::BF16, {256, h}, {}});
  for (auto& t : all)
    if (!damaged(c, t)) out.push_back(std::move(t));
}

/// The online configs are a few fixed texts: each is resolved once per release.
inline const resolved_config& resolved_online(const std::string& online, vllm_release release) {
  static std::map<std::pair<std::string, vllm_release>, resolved_config> cache;
  const auto key = std::make_pair(online, release);
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  config_request r;
  r.config_text = online;
  r.release = release;
  return cache.emplace(key, resolve(r).config).first->second;
}

/// The whole draw: what runs on the checkpoint first (so that a seed sets it at a fixed offset), then
/// the quantization_config and the model's tensors.
inline checkpoint_draw draw_checkpoint(choices& c, bool gpt_oss) {
  checkpoint_draw d;
  const auto method = static_cast<method_draw>(c.pick(static_cast<unsigned>(method_draw::count)));
  static constexpr const char* onlines[] = {R"(null)", R"({"linear": "fp8_per_block", "moe": "mxfp4"})", R"({"linear": "fp8_per_channel"})",
                                            R"({"moe": "nvfp4_per_token"})", R"({"targets": {"re:.*experts$": "fp8_per_tensor"}})",
                                            R"({"linear": "mxfp8", "ignore": ["re:.*self_attn.*"]})"};
  d.online = onlines[c.pick(6)];
  const unsigned quantization = c.pick(5);
  static constexpr checkpoint_format formats[] = {checkpoint_format::automatic, checkpoint_format::compressed_tensors, checkpoint_format::quark,
                                                  checkpoint_format::modelopt, checkpoint_format::vllm_fp8};
  d.format = formats[c.pick(5)];
  d.model_type = gpt_oss ? "gpt_oss" : "llama";
  d.end_to_end = c.pick(16) == 0;
  static constexpr const char* dtypes[] = {"bfloat16", "float16", "float32", "", "int8"};
  d.dtype = dtypes[c.pick(5)];
  natural_layouts natural;
  d.quantization_config = quantization_config(c, method, natural);
  model_tensors(c, natural, d.tensors);
  const auto& qc = d.quantization_config;
  const auto* m = qc.is_object() ? qc.get_object().if_contains("quant_method") : nullptr;
  if (quantization == 1 && m && m->is_string()) d.quantization = std::string(m->get_string());
  if (quantization == 2) d.quantization = std::string("fp8_per_tensor");
  if (quantization == 3) d.quantization = std::string("online");
  d.fill = static_cast<std::uint8_t>(0x3c ^ c.pick(256));  // 0x3c: finite codes and scales in every format
  d.truncate = c.pick(16) == 15 ? 1 + c.pick(64) : 0;
  return d;
}

/// The draw's model directory: config.json and model.safetensors (tensors of more than 1 MiB keep their
/// shape but no data, which the reader refuses).
inline void write_model_dir(const std::filesystem::path& dir, const checkpoint_draw& d) {
  std::filesystem::create_directories(dir);
  json::object config{{"architectures", json::array{"LlamaForCausalLM"}}, {"model_type", d.model_type}};
  if (!d.dtype.empty()) config["torch_dtype"] = d.dtype;
  config["quantization_config"] = d.quantization_config;
  std::ofstream(dir / "config.json") << json::serialize(config);
  json::object header;
  std::string data;
  for (const auto& t : d.tensors) {
    long double bytes = static_cast<long double>(safetensors::size_of(t.type));
    json::array shape;
    for (const auto dim : t.shape) bytes *= static_cast<long double>(dim), shape.emplace_back(dim);
    const std::size_t begin = data.size();
    if (bytes >= 0 && bytes <= (1 << 20)) {
      std::string bytes_of(static_cast<std::size_t>(bytes), static_cast<char>(d.fill));
      const std::size_t width = t.type == st::I64 ? 8 : 4;
      for (std::size_t i = 0; i < t.values.size() && (i + 1) * width <= bytes_of.size(); ++i)
        for (std::size_t b = 0; b < width; ++b) bytes_of[i * width + b] = static_cast<char>(static_cast<std::uint64_t>(t.values[i]) >> (8 * b));
      data += bytes_of;
    }
    header[t.name] = json::object{{"dtype", safetensors::to_string(t.type)}, {"shape", std::move(shape)},
                                  {"data_offsets", json::array{begin, data.size()}}};
  }
  auto text = json::serialize(header);
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[static_cast<std::size_t>(i)] = static_cast<char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));
  file += text + data;
  file.resize(file.size() - std::min(d.truncate, file.size()));
  std::ofstream(dir / "model.safetensors", std::ios::binary) << file;
}

/// Seeds of the structured grammar: each method's well-formed checkpoint under each online config, as a
/// directory (release 0.34; 0.32 for the first online config), headers only, and gpt-oss's.
inline std::vector<std::string> structured_seeds() {
  std::vector<std::string> out;
  for (char m = 0; m < static_cast<char>(method_draw::count); ++m) {
    for (char online = 0; online < 6; ++online) out.push_back(std::string("\x98", 1) + m + online + std::string(64, '\0'));
    out.push_back(std::string("\x88", 1) + m + std::string(64, '\0'));
    out.push_back(std::string("\x94", 1) + m + '\x01' + std::string(64, '\0'));
  }
  out.push_back(std::string("\x99\x02\x00", 3) + std::string(64, '\0'));
  out.push_back(std::string("\x99\x02\x01", 3) + std::string(64, '\0'));
  out.push_back(std::string("\x99\x06\x00", 3) + std::string(64, '\0'));  // Quark keeping gpt-oss's experts
  out.push_back(std::string("\x99\x06\x02", 3) + std::string(64, '\0'));
  for (char format = 1; format < 5; ++format)  // compressed-tensors' other formats: after method, online, -q, --format, end to end, dtype
    out.push_back(std::string("\x98\x01\x00\x00\x00\x00\x00", 7) + format + std::string(64, '\0'));
  return out;
}

}  // namespace qpolicy::fuzz
