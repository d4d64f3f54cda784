#pragma once
// Summaries of a plan (spec §3.8): quantized layers grouped by (suffix, source, pattern, key).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "qpolicy/model/model.hpp"
#include "qpolicy/config/config.hpp"
#include "qpolicy/plan/plan.hpp"

namespace qpolicy {

namespace detail {
/// The last '.' in s[0, end), or npos.
constexpr std::size_t last_dot_before(std::string_view s, std::size_t end) {
  while (end > 0)
    if (s[--end] == '.') return end;
  return std::string_view::npos;
}

/// Up to eight bytes of `s` from `at` as an integer: a cheap fingerprint of a string (with its size).
constexpr std::uint64_t word_at(std::string_view s, std::size_t at) {
  std::uint64_t w = 0;
  if (!std::is_constant_evaluated() && at + 8 <= s.size()) {
    std::memcpy(&w, s.data() + at, 8);
    return w;
  }
  for (std::size_t k = 0; k < 8 && at + k < s.size(); ++k) w |= std::uint64_t{static_cast<unsigned char>(s[at + k])} << (8 * k);
  return w;
}
}  // namespace detail

/// The part of a layer name after its last all-digit dotted component (the whole name if none).
/// Scanned from the end, a component at a time: the last such component is usually the layer index,
/// near the end, and a component is read only when it starts with a digit.
constexpr std::string_view layer_suffix(std::string_view name) {
  std::size_t end = name.size();  // the current component is name[start, end)
  while (true) {
    const auto dot = detail::last_dot_before(name, end);
    const std::size_t start = dot == std::string_view::npos ? 0 : dot + 1;
    bool digits = start < end;
    for (std::size_t i = start; digits && i < end; ++i) digits = name[i] >= '0' && name[i] <= '9';
    if (digits) return end >= name.size() ? std::string_view() : name.substr(end + 1);
    if (dot == std::string_view::npos) return name;
    end = dot;
  }
}

/// The spec a quantized layer's decision stands for (str(spec) is its summary key).
constexpr quant_spec spec_of(const layer_plan& l) {
  quant_spec s;
  s.weight = l.weight;
  s.weight_set = true;
  s.activation_set = l.activation != activation_kind::method_default;
  if (l.activation == activation_kind::key) s.activation = l.activation_key;
  s.hadamard_size = hadamard_size_of(l);
  return s;
}

/// The summary lines of a plan: "{suffix}: {count} (from {source}: [{pattern}, ]{key})", sorted.
constexpr std::vector<std::string> summarize(const plan& p, const model_desc& model) {
  // Views into the plan and model; the key text is made once per group, not per layer. A layer finds
  // its group by integers (the suffix's size and its first and last eight bytes, the rule, the
  // pattern's first index with its text, the key) before one comparison of the suffix itself.
  struct group {
    std::string_view suffix, source, pattern;
    std::uint64_t suffix_head = 0, suffix_tail = 0;
    decided_by rule = decided_by::none;
    std::int32_t pattern_index = -1;  // the first index in p.patterns with this pattern's text
    bool has_pattern = false;
    std::optional<shorthand> target;
    key_id weight = key_id::fp8_per_tensor_static;
    activation_kind activation = activation_kind::method_default;
    key_id activation_key = key_id::fp8_per_tensor_dynamic;
    std::uint8_t hadamard = 0;
    std::string key;
    std::size_t count = 0;
  };
  std::vector<std::int32_t> first_with_text(p.patterns.size());
  for (std::size_t k = 0; k < p.patterns.size(); ++k) {
    std::size_t j = 0;
    while (p.patterns[j] != p.patterns[k]) ++j;
    first_with_text[k] = static_cast<std::int32_t>(j);
  }
  std::vector<group> groups;
  for (std::size_t i = 0; i < p.layers.size(); ++i) {
    const auto& l = p.layers[i];
    if (!l.quantized()) continue;
    const auto suffix = layer_suffix(model.layers[i].name);
    const auto head = detail::word_at(suffix, 0);
    const auto tail = detail::word_at(suffix, suffix.size() < 8 ? 0 : suffix.size() - 8);
    const std::int32_t pattern = l.pattern >= 0 ? first_with_text[static_cast<std::size_t>(l.pattern)] : -1;
    bool found = false;
    for (auto& o : groups)
      if (o.suffix_head == head && o.suffix_tail == tail && o.suffix.size() == suffix.size() && o.rule == l.source &&
          o.pattern_index == pattern && o.target == l.target &&
          (l.target || (o.weight == *l.weight && o.activation == l.activation && o.hadamard == l.hadamard &&
                        (l.activation != activation_kind::key || o.activation_key == l.activation_key))) &&
          o.suffix == suffix) {
        ++o.count;
        found = true;
        break;
      }
    if (found) continue;
    group g;
    g.suffix = suffix;
    g.suffix_head = head;
    g.suffix_tail = tail;
    g.rule = l.source;
    g.source = to_string(l.source);
    g.pattern_index = pattern;
    g.pattern = p.pattern_of(l);
    g.has_pattern = l.pattern >= 0;
    g.target = l.target;
    if (l.weight) g.weight = *l.weight;
    g.activation = l.activation;
    g.activation_key = l.activation_key;
    g.hadamard = l.hadamard;
    if (l.target) g.key = to_string(*l.target);
    else g.key = spec_str(spec_of(l), p.release);
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
