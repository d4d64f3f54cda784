#pragma once
// Unicode lookups over the generated tables (unicode_tables.hpp, read back from the `regex` package):
// property membership, simple case-folding classes, and the package's property name resolution
// (lookup_property in _regex_core.py) for the properties qpolicy has tables for. All constexpr.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "qpolicy/match/detail/unicode_tables.hpp"

namespace qpolicy::match::unicode {

constexpr bool is_word_ascii(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/// The first index in [0, n) for which below(index) is false (binary search over a sorted table).
template <class Below>
constexpr std::size_t first_not_below(std::size_t n, Below&& below) {
  std::size_t lo = 0, hi = n;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (below(mid)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/// The element of a sorted table with this key, or nullptr.
template <class T, std::size_t N, class Key, class KeyOf>
constexpr const T* find_sorted(const T (&table)[N], const Key& key, KeyOf&& key_of) {
  const std::size_t at = first_not_below(N, [&](std::size_t i) { return key_of(table[i]) < key; });
  return at < N && key_of(table[at]) == key ? &table[at] : nullptr;
}

/// The span of a property key, or nullptr.
constexpr const property_span* find_span(std::uint32_t key) {
  return find_sorted(property_spans, key, [](const property_span& s) { return s.key; });
}

/// Whether `c` has the property of `span` (binary search over its ranges).
constexpr bool in_span(const property_span& span, char32_t c) {
  const char32_t* r = property_ranges + 2 * span.begin;
  const std::size_t lo = first_not_below(span.count, [&](std::size_t i) { return r[2 * i + 1] < c; });
  return lo < span.count && r[2 * lo] <= c;
}

constexpr bool has_property(std::uint32_t key, char32_t c) {
  const auto* s = find_span(key);
  return s && in_span(*s, c);
}

/// Calls fn(c) for every ASCII code point with the property.
template <class Fn>
constexpr void for_each_ascii_member(std::uint32_t key, Fn&& fn) {
  const auto* s = find_span(key);
  if (!s) return;
  const char32_t* r = property_ranges + 2 * s->begin;
  for (std::uint32_t k = 0; k < s->count && r[2 * k] < 128; ++k)
    for (char32_t c = r[2 * k]; c <= r[2 * k + 1] && c < 128; ++c) fn(c);
}

/// \w as the package reads it: Unicode Word, or ASCII word characters under the ASCII flag.
constexpr bool is_word(char32_t c, bool ascii) {
  if (c < 128) return is_word_ascii(c);
  return !ascii && has_property(word_key, c);
}

/// The other code points of `c`'s simple case-folding class (regex._regex.get_all_cases under
/// IGNORECASE); under the ASCII flag only ASCII letters have cases. Returns how many were written.
constexpr int other_cases(char32_t c, bool ascii, char32_t out[3]) {
  if (ascii) {
    if (c >= 'a' && c <= 'z') { out[0] = c - 32; return 1; }
    if (c >= 'A' && c <= 'Z') { out[0] = c + 32; return 1; }
    return 0;
  }
  const std::size_t at = first_not_below(case_class_count, [&](std::size_t i) { return case_classes[4 * i] < c; });
  if (at == case_class_count || case_classes[4 * at] != c) return 0;
  int n = 0;
  for (std::size_t k = 1; k < 4; ++k)
    if (const char32_t o = case_classes[4 * at + k]) out[n++] = o;
  return n;
}

/// The package's standardise_name: an integer becomes its decimal form, anything else upper case
/// without ' ', '_' and '-'. Returns false for the other numbers (fractions, decimals), which qpolicy
/// has no properties for.
constexpr bool standardise(std::u32string_view name, std::string& out) {
  out.clear();
  std::size_t k = 0;
  const bool minus = !name.empty() && name[0] == U'-';
  bool integer = name.size() > (minus ? 1u : 0u), numeric = integer;
  for (std::size_t i = minus ? 1 : 0; i < name.size(); ++i) {
    const char32_t c = name[i];
    integer = integer && c >= U'0' && c <= U'9';
    numeric = numeric && ((c >= U'0' && c <= U'9') || c == U'.' || c == U'/' || c == U'_');
  }
  if (integer) {  // int(float(name)): leading zeros go, "-0" is "0"
    std::size_t i = minus ? 1 : 0;
    while (i + 1 < name.size() && name[i] == U'0') ++i;
    if (minus && !(name.size() - i == 1 && name[i] == U'0')) out += '-';
    for (; i < name.size(); ++i) out += static_cast<char>(name[i]);
    return true;
  }
  if (numeric) return false;
  for (; k < name.size(); ++k) {
    const char32_t c = name[k];
    if (c == U' ' || c == U'_' || c == U'-') continue;
    if (c >= 128) return false;
    out += static_cast<char>(c >= U'a' && c <= U'z' ? c - 32 : c);
  }
  return true;
}

constexpr const known_property* find_property(std::string_view standard) {
  return find_sorted(known_properties, standard, [](const known_property& p) { return std::string_view(p.name); });
}

/// The value of property `id` named `standard`, or nullptr.
constexpr const known_value* find_value(std::uint32_t id, std::string_view standard) {
  return find_sorted(known_values, std::pair{id, standard},
                     [](const known_value& v) { return std::pair{v.id, std::string_view(v.name)}; });
}

/// A resolved property: its key and sign, or why it could not be resolved.
struct resolved_property {
  enum class status : std::uint8_t { ok, unknown_property, unknown_value, unsupported } state = status::unsupported;
  std::uint32_t key = 0;
  bool positive = true;
};

/// lookup_property of the package (`property` empty when only a value is given). A property the
/// package knows but qpolicy has no table for is `unsupported`.
constexpr resolved_property lookup_property(std::u32string_view property, std::u32string_view value, bool positive,
                                            bool posix) {
  using st = resolved_property::status;
  resolved_property r;
  std::string prop, val;
  if (!property.empty() && !standardise(property, prop)) return r;
  if (!standardise(value, val)) return r;
  auto found = [&](std::uint32_t key, bool sign) -> resolved_property {
    if (!find_span(key)) return {st::unsupported, key, sign};
    return {st::ok, key, sign};
  };
  if (prop == "GENERALCATEGORY" && val == "ASSIGNED") {
    val = "UNASSIGNED";
    positive = !positive;
  }
  if (posix && property.empty() && (val == "ALNUM" || val == "DIGIT" || val == "PUNCT" || val == "XDIGIT"))
    val = "POSIX" + val;
  if (!property.empty()) {
    const auto* p = find_property(prop);
    if (!p) return {st::unknown_property, 0, positive};
    const auto* v = find_value(p->id, val);
    if (!v) return {st::unknown_value, 0, positive};
    return found((p->id << 16) | v->value, positive);
  }
  for (std::string_view named : {std::string_view("GC"), std::string_view("SCRIPT"), std::string_view("BLOCK")}) {
    const auto* p = find_property(named);
    if (const auto* v = p ? find_value(p->id, val) : nullptr) return found((p->id << 16) | v->value, positive);
  }
  if (const auto* p = find_property(val)) {
    if (p->binary) return found((p->id << 16) | 1, positive);
    return {st::unsupported, p->id << 16, !positive};
  }
  if (val.size() > 2 && val.substr(0, 2) == "IS") {
    const auto* p = find_property(std::string_view(val).substr(2));
    if (p && find_value(p->id, "YES")) return found((p->id << 16) | 1, positive);
  }
  for (auto [prefix, named] : {std::pair<std::string_view, std::string_view>{"IS", "SCRIPT"}, {"IN", "BLOCK"}}) {
    if (val.size() < 2 || std::string_view(val).substr(0, 2) != prefix) continue;
    const auto* p = find_property(named);
    if (const auto* v = p ? find_value(p->id, std::string_view(val).substr(2)) : nullptr)
      return found((p->id << 16) | v->value, positive);
  }
  return {st::unknown_property, 0, positive};
}

}  // namespace qpolicy::match::unicode
