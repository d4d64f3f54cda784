#pragma once
// The compiled form shared by every matcher: a Thompson NFA over Unicode code points. The regex and
// glob compilers produce it, the constexpr simulator (nfa.hpp) and the runtime lazy DFA
// (pattern_set.hpp) run it, so the compile-time and run-time front ends decide every name alike.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace qpolicy::match {

/// A character class: membership bits for ASCII, explicit ranges above it, optional negation.
struct char_set {
  std::uint64_t ascii[2] = {0, 0};
  std::vector<std::pair<char32_t, char32_t>> wide;  // ranges >= U+0080, before negation
  bool negated = false;
  bool unicode_class = false;  // holds \d \w \s (or negations): membership above ASCII is not decided here

  constexpr void add(char32_t lo, char32_t hi) {
    for (char32_t c = lo; c <= hi && c < 128; ++c) ascii[c >> 6] |= std::uint64_t{1} << (c & 63);
    if (hi >= 128) wide.emplace_back(lo < 128 ? char32_t{128} : lo, hi);
  }
  constexpr void add_ascii_complement_of(const char_set& other) {
    ascii[0] |= ~other.ascii[0];
    ascii[1] |= ~other.ascii[1];
  }
  constexpr bool ascii_member(char32_t c) const { return ((ascii[c >> 6] >> (c & 63)) & 1) != negated; }
};

/// Outcome of testing one character: above ASCII a Unicode class cannot be decided.
enum class tri : std::uint8_t { no, yes, unknown };

constexpr tri set_contains(const char_set& s, char32_t c) {
  if (c < 128) return s.ascii_member(c) ? tri::yes : tri::no;
  for (const auto& [lo, hi] : s.wide)
    if (c >= lo && c <= hi) return s.negated ? tri::no : tri::yes;
  if (s.unicode_class) return tri::unknown;
  return s.negated ? tri::yes : tri::no;
}

enum class op : std::uint8_t {
  set,          // consume one character in sets[a]
  literal,      // consume the code point a (a one-character set without the set)
  any_but_nl,   // '.'
  any,          // '.' under DOTALL (globs)
  split,        // continue at a and at b
  jmp,          // continue at a
  at_begin,     // ^ \A
  at_dollar,    // $ : end of text or before a final '\n'
  at_end,       // \Z
  word_edge,    // \b
  not_word_edge,// \B
  match,        // pattern a matched (sticky: the rest of the text is irrelevant)
};

struct inst {
  op code = op::match;
  std::uint32_t a = 0, b = 0;
};

/// One or more compiled patterns; pattern k's instructions are tagged with owner k.
struct program {
  std::vector<inst> insts;
  std::vector<char_set> sets;
  std::vector<std::uint32_t> owner;   // pattern id per instruction
  std::vector<std::uint32_t> starts;  // entry pc per pattern
  bool uses_word_edges = false;
};

/// How large a pattern may grow once counted repetitions are expanded.
inline constexpr std::size_t max_program_size = 20000;

constexpr bool is_word_ascii(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace qpolicy::match
