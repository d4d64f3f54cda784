// The online plan composed with a quantized checkpoint's own method (composed_plan.hpp), and its
// printing.
#include "qpolicy/plan/composed_plan.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>

#include "../json/json_text.hpp"
#include "plan_json.hpp"
#include "qpolicy/config/config.hpp"
#include "qpolicy/io/json_front.hpp"

namespace qpolicy {

namespace {

namespace bj = boost::json;
using source::decode_support;

/// How a release composes an online target with a layer the checkpoint quantizes (base_config.py
/// resolve_quant_method): refused, requantized for linear layers only, or for both.
enum class requantization : std::uint8_t { refused, linear_only, linear_and_moe };

struct composition_row {
  vllm_release release;
  requantization rule;
  bool hadamard_refused;   // 0.34: a Hadamard target on a checkpoint-quantized layer
  std::string_view no_decode;  // the base dequantize_weight's text after the class
};

constexpr composition_row composition_table[] = {
    {vllm_release::v0_30, requantization::refused, false, ""},
    {vllm_release::v0_31, requantization::refused, false, ""},
    {vllm_release::v0_32, requantization::linear_only, false, " does not implement dequantize_weight. Please open an issue."},
    {vllm_release::v0_33, requantization::linear_and_moe, false,
     " does not implement dequantize_weight, so re-quantization from this checkpoint is not supported. Please open an issue."},
    {vllm_release::v0_34, requantization::linear_and_moe, true,
     " does not implement dequantize_weight, so re-quantization from this checkpoint is not supported. Please open an issue."},
};

const composition_row& composition_of(vllm_release r) { return composition_table[static_cast<std::size_t>(r)]; }

/// The error dequantize_weight raises for the checkpoint's class of a requantized layer, if any.
std::optional<std::string> decode_error(const source::source_layer& s, vllm_release r) {
  const auto& c = source::class_of(s.cls);
  const bool implemented = c.decode != decode_support::none && r >= c.since;
  if (implemented && c.decode == decode_support::decodes) return std::nullopt;
  // ModelOptLinearMethod and QuarkLinearMethod decode MXFP8 weights only.
  if (implemented && c.decode == decode_support::mxfp8_only)
    return s.layout == source::stored_layout::mxfp8 ? std::nullopt : std::optional<std::string>(c.partial_text);
  return "The quantization method <class '" + std::string(c.qualified_name) + "'>" + std::string(composition_of(r).no_decode);
}

}  // namespace

const std::string* composed_plan::first_error() const {
  for (const auto stage : {error_stage::build, error_stage::load})
    for (const auto& l : layers)
      if (l.failed() && l.stage == stage) return &errors[static_cast<std::size_t>(l.error)];
  return nullptr;
}

composed_plan compose(plan online, const model_desc& model, const source::checkpoint_source& checkpoint) {
  composed_plan out;
  const auto r = online.release;
  const auto& row = composition_of(r);
  out.checkpoint = checkpoint;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& layer = model.layers[i];
    const auto& ol = online.layers[i];
    composed_layer c;
    c.checkpoint = checkpoint.decide(model, layer);
    auto fail = [&](std::string text, error_stage stage) {
      c.error = static_cast<std::int32_t>(out.errors.size());
      c.stage = stage;
      out.errors.push_back(std::move(text));
    };
    // 0.30-0.33 build the checkpoint's method first; 0.34 resolves the online target first.
    const bool online_first = r >= vllm_release::v0_34;
    if (ol.failed() && (online_first || !c.checkpoint.error)) fail(std::string(online.error_of(ol)), error_stage::build);
    else if (c.checkpoint.error) fail(*c.checkpoint.error, error_stage::build);
    const bool quantized = c.checkpoint.quantized();
    const bool target = !ol.failed() && ol.quantized() && layer.kind != layer_kind::other;
    if (!quantized) {
      c.kind = target ? composition::online : composition::unquantized;
    } else if (!target) {
      c.kind = composition::kept;
    } else {
      c.kind = composition::requantized;
      if (c.failed()) {
      } else if (row.rule == requantization::refused) {
        fail("Cannot apply requested online quantization " + key_name(*ol.weight, r) + " to pre-quantized layer " + layer.name + ": <" +
                 std::string(source::class_of(c.checkpoint.cls).qualified_name) +
                 " object at 0x...> was already selected by the checkpoint quantization config.",
             error_stage::build);
      } else if (row.rule == requantization::linear_only && layer.kind == layer_kind::moe) {
        fail("Requantizing checkpoint-quantized MoE layers is not supported.", error_stage::build);
      } else if (row.hadamard_refused && ol.hadamard) {
        fail(layer.name + ": online hadamard_size on an already quantized layer (requantization) is not supported yet.", error_stage::build);
      } else if (const auto e = decode_error(c.checkpoint, r)) {
        fail(*e, error_stage::load);
      }
    }
    out.layers.push_back(std::move(c));
  }
  out.online = std::move(online);
  out.summarize();
  return out;
}

void composed_plan::summarize() {
  std::size_t counts[4] = {};
  for (const auto& c : layers)
    if (!c.failed()) ++counts[static_cast<std::size_t>(c.kind)];
  const std::string from = std::string(source::method_of(checkpoint.method).vllm_name);
  summary = {fmt::format("checkpoint: {}", checkpoint.describe()),
             fmt::format("kept (the checkpoint's {}): {}", from, counts[static_cast<std::size_t>(composition::kept)]),
             fmt::format("requantized (decoded, then the online method): {}", counts[static_cast<std::size_t>(composition::requantized)]),
             fmt::format("quantized online: {}", counts[static_cast<std::size_t>(composition::online)]),
             fmt::format("unquantized: {}", counts[static_cast<std::size_t>(composition::unquantized)])};
}

std::string composed_plan_to_json(const composed_plan& p, const model_desc& model, const std::vector<std::string>& extra_warnings) {
  // The online plan's JSON, each layer with its composition and the checkpoint's decision added.
  auto doc = plan_json_object(p.online, model, extra_warnings);
  auto& layers = doc["layers"].as_array();
  const std::string method(source::method_of(p.checkpoint.method).vllm_name);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    auto& o = layers[i].as_object();
    const auto& c = p.layers[i];
    const auto& s = c.checkpoint;
    o["checkpoint"] = bj::object{{"method", s.quantized() ? bj::value(method) : bj::value(nullptr)},
                                 {"class", std::string(source::class_of(s.cls).qualified_name)},
                                 {"scheme", s.quantized() ? bj::value(s.scheme) : bj::value(nullptr)},
                                 {"rule", s.rule}};
    if (c.failed()) {
      o["composition"] = nullptr;
      o["error"] = std::string(p.error_of(c));
      o["error_stage"] = c.stage == error_stage::build ? "build" : "load";
    } else {
      o["composition"] = std::string(to_string(c.kind));
      // Decoded by qpolicy where the release fails to load the weights: said, with the release's error.
      if (c.extension >= 0) o["extension"] = bj::object{{"decoded_by", "qpolicy"}, {"vllm_load_error", std::string(p.extension_of(c))}};
    }
  }
  bj::array summary;
  for (const auto& s : p.summary) summary.emplace_back(s);
  for (const auto& s : doc["summary"].as_array()) summary.emplace_back(s);
  doc["summary"] = std::move(summary);
  doc["checkpoint"] = bj::object{{"quant_method", p.checkpoint.quant_method}, {"method", method}, {"description", p.checkpoint.describe()}};
  return json_text::serialize(doc);
}

std::string composed_plan_to_table(const composed_plan& p, const model_desc& model, const std::vector<std::string>& extra_warnings) {
  struct row {
    std::string cells[5];
  };
  std::vector<row> rows;
  rows.push_back({{"layer", "checkpoint", "online", "result", "why"}});
  const auto r = p.online.release;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& d = model.layers[i];
    const auto& ol = p.online.layers[i];
    const auto& c = p.layers[i];
    std::string online = "-";
    if (ol.failed()) online = "ERROR";
    else if (ol.quantized() && d.kind != layer_kind::other) online = ol.weight ? key_name(*ol.weight, r) : std::string(to_string(ol.decided));
    if (!ol.failed() && ol.hadamard) online += fmt::format(" (Hadamard {})", hadamard_size_of(ol));
    std::string result = c.failed() ? "ERROR: " + std::string(p.error_of(c)) : std::string(to_string(c.kind));
    if (!c.failed() && c.kind == composition::requantized) result += " (" + c.checkpoint.scheme + " -> " + online + ")";
    std::string why = c.checkpoint.rule;
    if (!ol.failed() && ol.source != decided_by::none && d.kind != layer_kind::other) {
      std::string by(to_string(ol.source));
      if (ol.pattern >= 0) by += " " + std::string(p.online.pattern_of(ol));
      why += (why.empty() ? "" : "; online: ") + by;
    }
    rows.push_back({{d.name, c.checkpoint.quantized() ? c.checkpoint.scheme : "-", online, result, why}});
  }
  std::size_t width[4] = {};
  for (const auto& x : rows)
    for (int k = 0; k < 4; ++k) width[k] = std::max(width[k], x.cells[k].size());
  std::string out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& x = rows[i];
    out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", x.cells[0], width[0], x.cells[1], width[1], x.cells[2], width[2], x.cells[3],
                       width[3], x.cells[4]);
    if (i == 0) out += std::string(width[0] + width[1] + width[2] + width[3] + 8 + 20, '-') + "\n";
  }
  out += "\n";
  for (const auto& s : p.summary) out += s + "\n";
  std::vector<std::string> warnings = extra_warnings;
  warnings.insert(warnings.end(), p.online.warnings.begin(), p.online.warnings.end());
  for (const auto& w : warnings) out += "warning: " + w + "\n";
  return out;
}

}  // namespace qpolicy
