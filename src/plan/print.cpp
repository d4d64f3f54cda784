// Plan printing: the JSON contract of cli.md and a human table.
#include <boost/json.hpp>
#include <fmt/core.h>

#include <algorithm>

#include "../json/json_text.hpp"
#include "plan_json.hpp"
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/plan/summary.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy {

namespace bj = boost::json;

namespace {

std::string activation_text(const layer_plan& l, vllm_release r) {
  switch (l.activation) {
    case activation_kind::method_default: return "default";
    case activation_kind::none: return "null";
    case activation_kind::key: return key_name(l.activation_key, r);
  }
  return "null";
}

std::string weight_text(const layer_plan& l, vllm_release r) {
  std::string out = key_name(*l.weight, r);
  if (l.hadamard) out += fmt::format(" (Hadamard {})", hadamard_size_of(l));
  return out;
}

std::vector<std::string> all_warnings(const plan& p, const std::vector<std::string>& extra) {
  std::vector<std::string> w = extra;
  w.insert(w.end(), p.warnings.begin(), p.warnings.end());
  return w;
}

}  // namespace

bj::object plan_json_object(const plan& p, const model_desc& model, const std::vector<std::string>& extra_warnings) {
  bj::array layers;
  layers.reserve(p.layers.size());
  for (std::size_t i = 0; i < p.layers.size(); ++i) {
    const auto& l = p.layers[i];
    const auto& d = model.layers[i];
    bj::object o;
    o.reserve(8);
    o["name"] = d.name;
    o["class"] = d.class_name;
    o["kind"] = std::string(to_string(d.kind));
    if (l.failed()) {
      o["error"] = std::string(p.error_of(l));
    } else {
      o["method"] = l.decided == method::none ? bj::value(nullptr) : bj::value(std::string(to_string(l.decided)));
      o["weight"] = l.weight ? bj::value(key_name(*l.weight, p.release)) : bj::value(nullptr);
      o["activation"] =
          (l.weight && l.activation != activation_kind::none) ? bj::value(activation_text(l, p.release)) : bj::value(nullptr);
      if (l.hadamard) o["hadamard_size"] = hadamard_size_of(l);
      o["source"] = l.source == decided_by::none ? bj::value(nullptr) : bj::value(std::string(to_string(l.source)));
      o["pattern"] = l.pattern >= 0 ? bj::value(std::string(p.pattern_of(l))) : bj::value(nullptr);
    }
    layers.emplace_back(std::move(o));
  }
  bj::object out;
  out["layers"] = std::move(layers);
  bj::array summary, warnings;
  for (const auto& s : p.summary) summary.emplace_back(s);
  for (const auto& w : all_warnings(p, extra_warnings)) warnings.emplace_back(w);
  out["summary"] = std::move(summary);
  out["warnings"] = std::move(warnings);
  return out;
}

std::string plan_to_json(const plan& p, const model_desc& model, const std::vector<std::string>& extra_warnings) {
  return json_text::serialize(plan_json_object(p, model, extra_warnings));
}

namespace {

/// What the weight-only schemes' layers of a plan run, from the scheme rows: one line per (scheme,
/// layer kind) that occurs, saying where the kernels emulate another architecture.
std::vector<std::string> kernel_notes(const plan& p, const model_desc& model) {
  std::vector<std::string> out;
  for (const auto& c : schemes::scheme_table)
    for (const layer_kind kind : {layer_kind::linear, layer_kind::moe}) {
      // Layers whose input is rotated (a Hadamard transform) run the rotation before the row's kernel.
      std::size_t n = 0, rotated = 0;
      for (std::size_t i = 0; i < p.layers.size(); ++i) {
        const auto& l = p.layers[i];
        if (l.failed() || l.decided != c.id || model.layers[i].kind != kind) continue;
        ++(l.hadamard ? rotated : n);
      }
      const bool moe = kind == layer_kind::moe;
      const std::string_view layers = moe ? "MoE" : "linear";
      if (rotated)
        out.push_back(fmt::format("{} {} layers with a Hadamard-rotated input ({}): the input rotated in the model dtype, then {}",
                                  to_string(c.id), layers, rotated, moe ? c.moe_kernel : c.linear_kernel));
      if (n == 0 || c.gemm == schemes::gemm_kind::scaled_fp8) continue;
      const std::string_view what = c.gemm == schemes::gemm_kind::none ? std::string_view("no kernel in this build")
                                    : moe                               ? c.moe_kernel
                                                                        : c.linear_kernel;
      out.push_back(fmt::format("{} {} layers ({}): {}", to_string(c.id), layers, n, what));
    }
  return out;
}

}  // namespace

std::string plan_to_table(const plan& p, const model_desc& model, const std::vector<std::string>& extra_warnings) {
  struct row {
    std::string cells[6];
  };
  std::vector<row> rows;
  rows.push_back({{"layer", "class", "method", "weight", "activation", "decided by"}});
  for (std::size_t i = 0; i < p.layers.size(); ++i) {
    const auto& l = p.layers[i];
    const auto& d = model.layers[i];
    if (l.failed()) {
      rows.push_back({{d.name, d.class_name, "ERROR", "-", "-", std::string(p.error_of(l))}});
      continue;
    }
    std::string by = l.source == decided_by::none ? (d.kind == layer_kind::other || !d.quantizable ? "-" : "no target")
                                                  : std::string(to_string(l.source));
    if (l.pattern >= 0) by += " " + std::string(p.pattern_of(l));
    if (!d.quantizable && d.kind != layer_kind::other) by = "- (not quantizable)";
    rows.push_back({{d.name, d.class_name, l.decided == method::none ? "-" : std::string(to_string(l.decided)),
                     l.weight ? weight_text(l, p.release) : "-", l.weight ? activation_text(l, p.release) : "-", by}});
  }
  std::size_t width[6] = {};
  for (const auto& r : rows)
    for (int c = 0; c < 5; ++c) width[c] = std::max(width[c], r.cells[c].size());
  std::string out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", r.cells[0], width[0], r.cells[1], width[1],
                       r.cells[2], width[2], r.cells[3], width[3], r.cells[4], width[4], r.cells[5]);
    if (i == 0) {
      std::size_t total = 10 + width[0] + width[1] + width[2] + width[3] + width[4] + 10;
      out += std::string(total, '-') + "\n";
    }
  }
  std::size_t errors = 0, quantized = 0, unquantized = 0, untouched = 0;
  for (const auto& l : p.layers) {
    if (l.failed()) ++errors;
    else if (l.quantized()) ++quantized;
    else if (l.decided == method::unquantized) ++unquantized;
    else ++untouched;
  }
  out += fmt::format("\n{} layers: {} quantized, {} left in high precision, {} not handled by online quantization, {} errors\n",
                     p.layers.size(), quantized, unquantized, untouched, errors);
  if (!p.summary.empty()) {
    out += "\n" + summary_log_line(p) + "\nsummary:\n";
    for (const auto& s : p.summary) out += "  " + s + "\n";
  }
  if (const auto notes = kernel_notes(p, model); !notes.empty()) {
    out += "\nkernels (Hopper and the CPU):\n";
    for (const auto& n : notes) out += "  " + n + "\n";
  }
  const auto warnings = all_warnings(p, extra_warnings);
  if (!warnings.empty()) {
    out += "\nwarnings:\n";
    for (const auto& w : warnings) out += "  " + w + "\n";
  }
  return out;
}

}  // namespace qpolicy
