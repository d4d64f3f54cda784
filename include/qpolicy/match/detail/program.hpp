#pragma once
// The compiled form shared by every matcher: a Thompson NFA over Unicode code points. The regex and
// glob compilers produce it, the constexpr simulator (nfa.hpp) and the runtime lazy DFA
// (pattern_set.hpp) run it, so the compile-time and run-time front ends decide every name alike.
#include <cstdint>
#include <string>
#include <utility>

#include "qpolicy/core/detail/lean_vector.hpp"
#include "qpolicy/match/detail/unicode.hpp"

namespace qpolicy::match {

/// A Unicode property inside a class (\d \w \s \h, \p{..}, [[:alpha:]]), with its sign.
struct class_item {
  std::uint32_t key = 0;  // unicode::property_span key
  bool positive = true;
  bool ascii = false;     // the ASCII encoding: other characters read as unassigned
  bool deferred = false;  // `ascii` comes from the pattern's final flags (POSIX classes, unscoped escapes)
};

/// A character class as the `regex` package matches it: literal ranges and property items, each item
/// folded on its own under IGNORECASE (a negated item is negated after folding), then the set's own
/// negation. Membership for ASCII is precomputed into `ascii`; above ASCII it is computed.
struct char_set {
  std::uint64_t ascii[2] = {0, 0};     // membership before the set's negation, for c < 128
  std::uint64_t literals[2] = {0, 0};  // the literal ASCII members (a non-ASCII character may fold to them)
  lean_vector<std::pair<char32_t, char32_t>> wide;  // literal ranges >= U+0080
  lean_vector<class_item> classes;
  bool negated = false;
  bool fold = false;          // IGNORECASE
  bool fold_ascii = false;    // cases within ASCII (the pattern's ASCII or LOCALE flag)

  constexpr void add(char32_t lo, char32_t hi) {
    for (char32_t c = lo; c <= hi && c < 128; ++c) literals[c >> 6] |= std::uint64_t{1} << (c & 63);
    if (hi >= 128) wide.emplace_back(lo < 128 ? char32_t{128} : lo, hi);
  }
  constexpr bool literal_member(char32_t c) const {
    if (c < 128) return (literals[c >> 6] >> (c & 63)) & 1;
    for (const auto& [lo, hi] : wide)
      if (c >= lo && c <= hi) return true;
    return false;
  }
  constexpr bool property_member(std::uint32_t key, char32_t c, bool ascii_only) const {
    if (c < 128) {
      bool in = false;
      unicode::for_each_ascii_member(key, [&](char32_t m) { in = in || m == c; });
      return in;
    }
    // Under ASCII the package reads every other character as unassigned: in Cn and C, and Any.
    if (ascii_only) return key == unicode::unassigned_key || key == unicode::other_key || key == unicode::any_key;
    return unicode::has_property(key, c);
  }
  /// A property under IGNORECASE, as the package's has_property_ign: the cased-letter categories
  /// (Lu, Ll, Lt) and Uppercase / Lowercase each stand for all of their group; any other property is
  /// tested on the character itself, not on its cases.
  constexpr bool property_member_ignoring_case(std::uint32_t key, char32_t c, bool ascii_only) const {
    using namespace unicode;
    if (key == uppercase_letter_key || key == lowercase_letter_key || key == titlecase_letter_key)
      return property_member(uppercase_letter_key, c, ascii_only) || property_member(lowercase_letter_key, c, ascii_only) ||
             property_member(titlecase_letter_key, c, ascii_only);
    if (key == uppercase_key || key == lowercase_key)
      return property_member(uppercase_key, c, ascii_only) || property_member(lowercase_key, c, ascii_only);
    return property_member(key, c, ascii_only);
  }
  /// Membership before negation, computed (what `ascii` caches for c < 128). Literal members match
  /// any case of `c` under IGNORECASE; each property item is negated after its own test.
  constexpr bool raw_member(char32_t c) const {
    char32_t cases[4] = {c, 0, 0, 0};
    const int n = 1 + (fold ? unicode::other_cases(c, fold_ascii, cases + 1) : 0);
    for (int k = 0; k < n; ++k)
      if (literal_member(cases[k])) return true;
    for (const auto& item : classes)
      if ((fold ? property_member_ignoring_case(item.key, c, item.ascii) : property_member(item.key, c, item.ascii)) ==
          item.positive)
        return true;
    return false;
  }
  /// Fills `ascii` once every item is in.
  constexpr void finish() {
    ascii[0] = literals[0];
    ascii[1] = literals[1];
    if (!fold && classes.empty()) return;
    for (char32_t c = 0; c < 128; ++c) {
      const bool plain = !fold && ((literals[c >> 6] >> (c & 63)) & 1);
      if (plain || raw_member(c)) ascii[c >> 6] |= std::uint64_t{1} << (c & 63);
    }
  }
  constexpr bool ascii_member(char32_t c) const { return ((ascii[c >> 6] >> (c & 63)) & 1) != negated; }
};

/// Outcome of testing one character (kept three-valued for the matchers; every answer is decided).
enum class tri : std::uint8_t { no, yes, unknown };

constexpr tri set_contains(const char_set& s, char32_t c) {
  if (c < 128) return s.ascii_member(c) ? tri::yes : tri::no;
  return s.raw_member(c) != s.negated ? tri::yes : tri::no;
}

/// Whether `c` matches the literal `lit` under simple case folding.
constexpr bool folded_equal(char32_t lit, char32_t c, bool ascii) {
  if (c == lit) return true;
  char32_t cases[3] = {0, 0, 0};
  const int n = unicode::other_cases(lit, ascii, cases);
  for (int k = 0; k < n; ++k)
    if (cases[k] == c) return true;
  return false;
}

enum class op : std::uint8_t {
  set,          // consume one character in sets[a]
  literal,      // consume the code point a (a one-character set without the set)
  literal_fold, // consume a case variant of the code point a (b: ASCII-only cases)
  any_but_nl,   // '.'
  any,          // '.' under DOTALL (globs)
  split,        // continue at a and at b
  jmp,          // continue at a
  at_begin,     // ^ \A
  at_dollar,    // $ : end of text or before a final '\n'
  at_end,       // \Z \z
  line_begin,   // ^ under MULTILINE
  line_end,     // $ under MULTILINE
  word_edge,    // \b (b: ASCII word characters only)
  not_word_edge,// \B
  word_start,   // \m
  word_end,     // \M
  match,        // pattern a matched (sticky: the rest of the text is irrelevant)
};

struct inst {
  op code = op::match;
  std::uint32_t a = 0, b = 0;
};

/// One or more compiled patterns; pattern k's instructions are tagged with owner k.
struct program {
  lean_vector<inst> insts;
  lean_vector<char_set> sets;
  lean_vector<std::uint32_t> owner;   // pattern id per instruction
  lean_vector<std::uint32_t> starts;  // entry pc per pattern
  bool uses_word_edges = false;
};

/// How large a pattern may grow once counted repetitions are expanded.
inline constexpr std::size_t max_program_size = 20000;

using unicode::is_word_ascii;

}  // namespace qpolicy::match
