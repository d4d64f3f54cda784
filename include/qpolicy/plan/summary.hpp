#pragma once
// Summaries of a plan (spec §3.8): quantized layers grouped by (suffix, source, pattern, key).
#include <algorithm>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "qpolicy/model/model.hpp"
#include "qpolicy/plan/plan.hpp"

namespace qpolicy {

/// The part of a layer name after its last all-digit dotted component (the whole name if none).
constexpr std::string_view layer_suffix(std::string_view name) {
  std::size_t start = 0, cut = std::string_view::npos;
  while (start <= name.size()) {
    auto end = name.find('.', start);
    if (end == std::string_view::npos) end = name.size();
    const auto part = name.substr(start, end - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) cut = end;
    start = end + 1;
  }
  if (cut == std::string_view::npos) return name;
  return cut >= name.size() ? std::string_view() : name.substr(cut + 1);
}

/// The summary lines of a plan: "{suffix}: {count} (from {source}: [{pattern}, ]{key})", sorted.
constexpr std::vector<std::string> summarize(const plan& p, const model_desc& model) {
  struct group {
    std::string suffix, source;
    bool has_pattern;
    std::string pattern, key;
    std::size_t count;
  };
  std::vector<group> groups;
  for (std::size_t i = 0; i < p.layers.size(); ++i) {
    const auto& l = p.layers[i];
    if (!l.quantized()) continue;
    group g{std::string(layer_suffix(model.layers[i].name)), std::string(to_string(l.source)), l.pattern >= 0,
            std::string(p.pattern_of(l)), l.target ? std::string(to_string(*l.target)) : key_name(*l.weight), 1};
    auto it = std::find_if(groups.begin(), groups.end(), [&](const group& o) {
      return o.suffix == g.suffix && o.source == g.source && o.has_pattern == g.has_pattern && o.pattern == g.pattern &&
             o.key == g.key;
    });
    if (it != groups.end()) ++it->count;
    else groups.push_back(std::move(g));
  }
  std::sort(groups.begin(), groups.end(), [](const group& a, const group& b) {
    return std::tie(a.suffix, a.source, a.has_pattern, a.pattern, a.key) <
           std::tie(b.suffix, b.source, b.has_pattern, b.pattern, b.key);
  });
  std::vector<std::string> lines;
  for (const auto& g : groups)
    lines.push_back(g.suffix + ": " + text::to_decimal(static_cast<long long>(g.count)) + " (from " + g.source + ": " +
                    (g.has_pattern ? g.pattern + ", " : std::string()) + g.key + ")");
  return lines;
}

/// vLLM's log line for a summary.
inline std::string summary_log_line(const std::vector<std::string>& summary) {
  std::string out = "Quantized " ;
  std::size_t n = 0;
  for (const auto& s : summary) {
    const auto colon = s.find(": ");
    const auto paren = s.find(" (", colon);
    n += std::stoul(s.substr(colon + 2, paren - colon - 2));
  }
  out += std::to_string(n) + " layers of types: ";
  for (std::size_t i = 0; i < summary.size(); ++i) out += (i ? "; " : "") + summary[i];
  return out;
}

}  // namespace qpolicy
