#pragma once
// vLLM's pattern forms (spec §4.1): "re:" regex anchored at the start, exact name, and (current schema
// only) Python fnmatchcase globs. A list of patterns compiles into one program; a pattern that is not
// a valid regex keeps its error, raised only when the pattern is tried, as vLLM does.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qpolicy/core/detail/lean_vector.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/match/detail/nfa.hpp"
#include "qpolicy/match/regex.hpp"

namespace qpolicy::match {

/// Whether a pattern list accepts globs (current schema) or only exact names and "re:" (legacy).
enum class glob_mode : std::uint8_t { off, on };

constexpr bool is_regex_pattern(std::string_view p) { return p.substr(0, 3) == "re:"; }
constexpr bool has_glob_magic(std::string_view p) { return p.find_first_of("*?[") != std::string_view::npos; }

/// Python's fnmatch.translate as regex text for compile_regex (dotall, whole-string).
constexpr std::string glob_to_regex(std::string_view glob) {
  const auto pat = text::decode_utf8(glob).code_points;
  const std::size_t n = pat.size();
  std::string out;
  auto literal = [&](char32_t c) {
    const bool alnum = (c >= U'a' && c <= U'z') || (c >= U'A' && c <= U'Z') || (c >= U'0' && c <= U'9') || c == U'_';
    if (c < 128 && !alnum) out += '\\';
    text::append_utf8(out, c);
  };
  auto slice = [&](std::size_t a, std::size_t b) { return std::u32string(pat.begin() + a, pat.begin() + b); };
  auto escape_in_set = [&](const std::u32string& s, bool escape_hyphen) {
    std::string r;
    for (char32_t c : s) {
      if (c == U'\\' || (escape_hyphen && c == U'-') || c == U'[' || c == U']' || c == U'^') r += '\\';
      text::append_utf8(r, c);
    }
    return r;
  };
  std::size_t i = 0;
  while (i < n) {
    const char32_t c = pat[i++];
    if (c == U'*') {
      if (out.size() < 2 || out.substr(out.size() - 2) != ".*") out += ".*";
    } else if (c == U'?') {
      out += '.';
    } else if (c == U'[') {
      std::size_t j = i;
      if (j < n && pat[j] == U'!') ++j;
      if (j < n && pat[j] == U']') ++j;
      while (j < n && pat[j] != U']') ++j;
      if (j >= n) {
        out += "\\[";
        continue;
      }
      const bool negate = pat[i] == U'!';
      std::u32string stuff_raw = slice(i, j);
      std::string stuff;
      bool any = true;
      if (stuff_raw.find(U'-') == std::u32string::npos) {
        stuff = escape_in_set(stuff_raw.substr(negate ? 1 : 0), false);
        any = !stuff_raw.substr(negate ? 1 : 0).empty();
      } else {
        lean_vector<std::u32string> chunks;
        std::size_t k = negate ? i + 2 : i + 1;
        std::size_t a = i;
        while (true) {
          std::size_t f = k;
          while (f < j && pat[f] != U'-') ++f;
          if (f >= j) break;
          chunks.push_back(slice(a, f));
          a = f + 1;
          k = f + 3;
        }
        auto chunk = slice(a, j);
        if (!chunk.empty()) chunks.push_back(chunk);
        else chunks.back() += U'-';
        // Remove empty ranges (invalid in a regex), exactly as fnmatch does.
        for (std::size_t q = chunks.size() - 1; q > 0; --q) {
          if (!chunks[q - 1].empty() && !chunks[q].empty() && chunks[q - 1].back() > chunks[q].front()) {
            chunks[q - 1] = chunks[q - 1].substr(0, chunks[q - 1].size() - 1) + chunks[q].substr(1);
            chunks.erase(chunks.begin() + static_cast<std::ptrdiff_t>(q));
          }
        }
        if (negate) chunks.front() = chunks.front().substr(1);
        std::u32string joined;
        for (std::size_t q = 0; q < chunks.size(); ++q) {
          if (q) stuff += '-';
          stuff += escape_in_set(chunks[q], true);
          joined += chunks[q];
        }
        any = !stuff.empty();
      }
      i = j + 1;
      if (!any && !negate) out += "[^\\x00-\\U0010ffff]";  // empty range: never matches
      else if (!any) out += '.';                               // negated empty range: any character
      else out += std::string(negate ? "[^" : "[") + stuff + "]";
    } else {
      literal(c);
    }
  }
  return out;
}

/// A list of patterns compiled into one program, pattern k being owner k.
struct compiled_patterns {
  program prog;
  lean_vector<maybe<regex_error>> errors;  // a bad regex, raised when the pattern is tried
  lean_vector<backtrack_pattern> backtracking;  // the patterns prog only holds a stand-in for
  bool any_error = false;  // some entry of errors is set (the planner's per-name fast path checks it)
  constexpr std::size_t size() const { return errors.size(); }
};

namespace detail {
constexpr void emit_literal_whole(program& prog, std::string_view name, std::uint32_t owner) {
  for (char32_t c : text::decode_utf8(name).code_points) {
    prog.insts.push_back({op::literal, static_cast<std::uint32_t>(c), 0});
    prog.owner.push_back(owner);
  }
  prog.insts.push_back({op::at_end, 0, 0});
  prog.owner.push_back(owner);
  prog.insts.push_back({op::match, owner, 0});
  prog.owner.push_back(owner);
}
}  // namespace detail

/// Compiles one pattern as owner `owner` (appending to `prog`); returns its regex error, if any.
constexpr maybe<regex_error> compile_pattern(program& prog, lean_vector<backtrack_pattern>& backtracking,
                                             std::string_view pattern, std::uint32_t owner, glob_mode globs) {
  const auto entry = static_cast<std::uint32_t>(prog.insts.size());
  prog.starts.push_back(entry);
  if (is_regex_pattern(pattern)) {
    auto err = compile_regex(prog, &backtracking, pattern.substr(3), owner, anchoring::prefix);
    if (err) {  // a never-matching entry keeps pattern ids aligned
      prog.sets.push_back(char_set{});
      prog.insts.push_back({op::set, static_cast<std::uint32_t>(prog.sets.size() - 1), 0});
      prog.owner.push_back(owner);
    }
    return err;
  }
  if (globs == glob_mode::off || !has_glob_magic(pattern)) {
    detail::emit_literal_whole(prog, pattern, owner);
    return std::nullopt;
  }
  // Exact test, then fnmatchcase: both alternatives of the same pattern.
  prog.insts.push_back({op::split, entry + 1, 0});
  prog.owner.push_back(owner);
  detail::emit_literal_whole(prog, pattern, owner);
  prog.insts[entry].b = static_cast<std::uint32_t>(prog.insts.size());
  auto err = compile_regex(prog, glob_to_regex(pattern), owner, anchoring::whole, /*dotall=*/true);
  if (err) {  // cannot happen for fnmatch output; keep the exact alternative alone
    prog.insts[entry].b = entry + 1;
    return regex_error{"internal error: glob " + text::py_repr(pattern) + " translated to an invalid regex: " +
                           err->message,
                       true};
  }
  return std::nullopt;
}

constexpr compiled_patterns compile_patterns(const std::vector<std::string>& patterns, glob_mode globs) {
  compiled_patterns out;
  std::size_t chars = 0;
  for (std::size_t k = 0; k < patterns.size(); ++k) chars += patterns[k].size();
  out.prog.insts.reserve(3 * chars + 4 * patterns.size());  // typical size: no reallocation
  out.prog.owner.reserve(3 * chars + 4 * patterns.size());
  for (std::size_t k = 0; k < patterns.size(); ++k) {
    out.errors.push_back(compile_pattern(out.prog, out.backtracking, patterns[k], static_cast<std::uint32_t>(k), globs));
    out.any_error |= out.errors.back().has_value();
  }
  return out;
}

/// Which patterns of a list matched one name.
struct pattern_hits {
  lean_vector<std::uint64_t> bits;
  lean_vector<std::uint32_t> over_budget;  // backtracking patterns that ran out of steps on this name
  constexpr bool test(std::size_t k) const { return (bits[k >> 6] >> (k & 63)) & 1; }
  constexpr bool any() const {
    for (auto w : bits)
      if (w) return true;
    return false;
  }
  /// Index of the first matching pattern, or -1.
  constexpr long first() const {
    for (std::size_t w = 0; w < bits.size(); ++w)
      if (bits[w]) return static_cast<long>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(bits[w])));
    return -1;
  }
  bool operator==(const pattern_hits&) const = default;
};

/// Adds the answers of the backtracking patterns to `out` (over_budget reset first).
constexpr void run_backtracking(const compiled_patterns& compiled, const lean_vector<char32_t>& name,
                                pattern_hits& out) {
  out.over_budget.clear();
  for (const auto& bp : compiled.backtracking) {
    // Without the literal every match holds there is no match, and no steps to count.
    // (A string_view search: <algorithm> for std::search alone costs every includer 0.1 s of g++.)
    const std::u32string_view text(name.data(), name.size()), literal(bp.required.data(), bp.required.size());
    if (!literal.empty() && text.find(literal) == std::u32string_view::npos) continue;
    const auto answer = run_backtrack(bp.code, name);
    if (answer.over_budget) out.over_budget.push_back(bp.owner);
    else if (answer.matched) out.bits[bp.owner >> 6] |= std::uint64_t{1} << (bp.owner & 63);
  }
}

/// The constexpr counterpart of pattern_set: same program, NFA simulation only.
class nfa_pattern_set {
 public:
  constexpr nfa_pattern_set() = default;
  constexpr explicit nfa_pattern_set(compiled_patterns compiled) : compiled_(std::move(compiled)) {}
  constexpr std::size_t size() const { return compiled_.size(); }
  constexpr bool any_error() const { return compiled_.any_error; }
  constexpr const maybe<regex_error>& error(std::size_t k) const { return compiled_.errors[k]; }
  constexpr void match(std::string_view name, pattern_hits& out) const {
    const auto points = text::decode_utf8(name).code_points;
    const auto res = run_nfa(compiled_.prog, points);
    out.bits.assign((size() + 63) / 64, 0);
    for (std::size_t k = 0; k < size(); ++k)
      if (res.matched[k]) out.bits[k >> 6] |= std::uint64_t{1} << (k & 63);
    run_backtracking(compiled_, points, out);
  }

 private:
  compiled_patterns compiled_;
};

/// The error of a backtracking pattern that ran out of steps on a name.
constexpr regex_error budget_error(std::string_view pattern, std::string_view name) {
  return regex_error{"qpolicy stopped matching pattern " + text::py_repr(pattern) + " against layer name " +
                         text::py_repr(name) + " after " + text::to_decimal(static_cast<long long>(backtrack_step_budget)) +
                         " backtracking steps (its budget per name): the pattern backtracks catastrophically on it; "
                         "rewrite it without nested quantifiers over the same characters",
                     true};
}

/// One pattern against one name with the constexpr NFA (tests and compile-time use).
struct single_match {
  bool matched = false;
  maybe<regex_error> error;
};

constexpr single_match match_one(std::string_view pattern, std::string_view name, glob_mode globs) {
  compiled_patterns c;
  auto err = compile_pattern(c.prog, c.backtracking, pattern, 0, globs);
  if (err) return {false, err};
  c.errors.push_back(std::nullopt);
  const auto points = text::decode_utf8(name).code_points;
  const auto res = run_nfa(c.prog, points);
  pattern_hits hits;
  hits.bits.assign(1, res.matched[0] ? 1 : 0);
  run_backtracking(c, points, hits);
  if (!hits.over_budget.empty()) return {false, budget_error(pattern, name)};
  return {hits.test(0), std::nullopt};
}

}  // namespace qpolicy::match
