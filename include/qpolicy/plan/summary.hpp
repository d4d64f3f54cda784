#pragma once
// Summaries of a plan (spec §3.8): quantized layers grouped by (suffix, source, pattern, key).
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "qpolicy/model/model.hpp"
#include "qpolicy/plan/plan.hpp"

namespace qpolicy {

/// The part of a layer name after its last all-digit dotted component (the whole name if none).
/// Scanned from the end: the last such component is usually the layer index, near the end.
constexpr std::string_view layer_suffix(std::string_view name) {
  std::size_t end = name.size();
  while (true) {
    const auto dot = end == 0 ? std::string_view::npos : name.rfind('.', end - 1);
    const std::size_t start = dot == std::string_view::npos ? 0 : dot + 1;
    const auto part = name.substr(start, end - start);
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return end >= name.size() ? std::string_view() : name.substr(end + 1);
    if (dot == std::string_view::npos) return name;
    end = dot;
  }
}

/// The summary lines of a plan: "{suffix}: {count} (from {source}: [{pattern}, ]{key})", sorted.
constexpr std::vector<std::string> summarize(const plan& p, const model_desc& model) {
  // Views into the plan and model; the key text is made once per group, not per layer.
  struct group {
    std::string_view suffix, source, pattern;
    bool has_pattern = false;
    std::optional<shorthand> target;
    key_id weight = key_id::fp8_per_tensor_static;
    std::string key;
    std::size_t count = 0;
  };
  std::vector<group> groups;
  for (std::size_t i = 0; i < p.layers.size(); ++i) {
    const auto& l = p.layers[i];
    if (!l.quantized()) continue;
    const auto suffix = layer_suffix(model.layers[i].name);
    const auto source = to_string(l.source);
    const auto pattern = p.pattern_of(l);
    bool found = false;
    for (auto& o : groups)
      if (o.suffix == suffix && o.source == source && o.has_pattern == (l.pattern >= 0) && o.pattern == pattern &&
          o.target == l.target && (l.target || o.weight == *l.weight)) {
        ++o.count;
        found = true;
        break;
      }
    if (found) continue;
    group g;
    g.suffix = suffix;
    g.source = source;
    g.pattern = pattern;
    g.has_pattern = l.pattern >= 0;
    g.target = l.target;
    if (l.weight) g.weight = *l.weight;
    if (l.target) g.key = to_string(*l.target);
    else g.key = key_name(*l.weight);
    g.count = 1;
    groups.push_back(g);
  }
  // Sort an index (GCC 12 mis-evaluates std::sort over string aggregates during constant evaluation).
  auto less = [&](const group& a, const group& b) {
    if (a.suffix != b.suffix) return a.suffix < b.suffix;
    if (a.source != b.source) return a.source < b.source;
    if (a.has_pattern != b.has_pattern) return !a.has_pattern;
    if (a.pattern != b.pattern) return a.pattern < b.pattern;
    return a.key < b.key;
  };
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    std::size_t at = order.size();
    while (at > 0 && less(groups[i], groups[order[at - 1]])) --at;
    order.insert(order.begin() + static_cast<std::ptrdiff_t>(at), i);
  }
  std::vector<std::string> lines;
  for (auto i : order) {
    const auto& g = groups[i];
    // Appended piecewise: GCC 12 double-destroys a ?: string temporary during constant evaluation.
    std::string line(g.suffix);
    line += ": ";
    line += text::to_decimal(static_cast<long long>(g.count));
    line += " (from ";
    line += g.source;
    line += ": ";
    if (g.has_pattern) {
      line += g.pattern;
      line += ", ";
    }
    line += g.key;
    line += ")";
    lines.push_back(line);
  }
  return lines;
}

/// vLLM's log line for a plan: "Quantized {n} layers of types: " + the summary lines joined by "; ".
constexpr std::string summary_log_line(const plan& p) {
  std::size_t n = 0;
  for (const auto& l : p.layers) n += l.quantized();
  std::string out = "Quantized " + text::to_decimal(static_cast<long long>(n)) + " layers of types: ";
  for (std::size_t i = 0; i < p.summary.size(); ++i) {
    if (i) out += "; ";
    out += p.summary[i];
  }
  return out;
}

}  // namespace qpolicy
