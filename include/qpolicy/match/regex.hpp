#pragma once
// A constexpr compiler for the Python `re`/`regex` syntax people write in layer patterns: literals,
// '.', classes (ranges, negation, \d \w \s), * + ? {m,n} greedy and lazy, groups, (?:), named groups,
// alternation, ^ $ \A \Z \b \B and escapes. Errors carry the `regex` package's text and positions
// (counted in code points). Constructs that change what matches in ways an NFA cannot express
// (lookaround, backreferences, possessive/atomic groups, inline flags) and POSIX classes (`[[:digit:]]`,
// which `re` and the `regex` package read differently) are refused with a clear "unsupported" error
// instead of being mis-matched.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qpolicy/core/maybe.hpp"
#include "qpolicy/core/text.hpp"
#include "qpolicy/match/program.hpp"
#include "qpolicy/match/regex_ast.hpp"

namespace qpolicy::match {

/// A pattern the matcher refused: either invalid for Python too (`unsupported == false`, message as
/// the `regex` package words it), or valid Python that qpolicy's engine does not run.
struct regex_error {
  std::string message;
  bool unsupported = false;
};

namespace detail {

class regex_parser {
 public:
  // Room for every node up front: a node holds a vector, and moving nodes when the list grows is
  // a large part of compiling a pattern during constant evaluation.
  constexpr regex_parser(std::vector<char32_t> pattern, bool dotall) : p_(std::move(pattern)), dotall_(dotall) {
    nodes.reserve(2 * p_.size() + 2);
  }

  std::vector<node> nodes;
  std::vector<char_set> sets;
  maybe<regex_error> error;
  bool uses_word_edges = false;

  constexpr std::uint32_t parse() {
    const auto root = parse_alt(0);
    if (!error && pos_ < p_.size()) fail("unbalanced parenthesis", pos_);  // a stray ')'
    return root;
  }

 private:
  std::vector<char32_t> p_;
  bool dotall_;
  std::size_t pos_ = 0;
  std::uint32_t groups_ = 0;

  constexpr void fail(std::string_view what, std::size_t at) {
    if (!error) error = regex_error{std::string(what) + " at position " + text::to_decimal(static_cast<long long>(at)), false};
  }
  constexpr void unsupported(std::string_view what, std::size_t at) {
    if (!error)
      error = regex_error{"unsupported regex syntax at position " + text::to_decimal(static_cast<long long>(at)) + ": " +
                              std::string(what) +
                              " (qpolicy matches the Python re subset of literals, classes, quantifiers, groups, "
                              "alternation and anchors)",
                          true};
  }
  constexpr bool at_end() const { return pos_ >= p_.size(); }
  constexpr char32_t peek(std::size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : 0; }

  constexpr std::uint32_t add(node n) {
    nodes.push_back(std::move(n));
    return static_cast<std::uint32_t>(nodes.size() - 1);
  }
  constexpr std::uint32_t add_set(char_set s) {
    sets.push_back(std::move(s));
    node n;
    n.kind = node_kind::set;
    n.set = static_cast<std::uint32_t>(sets.size() - 1);
    return add(std::move(n));
  }
  // A one-character instruction, not a set: building sets is the costly part of compiling a pattern
  // during constant evaluation, and most characters of most patterns are literals.
  constexpr std::uint32_t literal(char32_t c) {
    node n;
    n.kind = node_kind::literal;
    n.set = static_cast<std::uint32_t>(c);
    return add(std::move(n));
  }

  constexpr std::uint32_t parse_alt(int depth) {
    if (depth > 200) { unsupported("groups nested more than 200 deep", pos_); return add({}); }
    node alt;
    alt.kind = node_kind::alt;
    alt.kids.push_back(parse_seq(depth));
    while (!error && peek() == U'|' && !at_end()) {
      ++pos_;
      alt.kids.push_back(parse_seq(depth));
    }
    if (alt.kids.size() == 1) return alt.kids[0];
    return add(std::move(alt));
  }

  static constexpr bool is_digit(char32_t c) { return c >= U'0' && c <= U'9'; }

  // Recognises {m}, {m,}, {,n}, {m,n}; anything else after '{' is a literal brace (as in `regex`).
  constexpr bool brace_repeat(std::uint32_t& lo, std::uint32_t& hi, std::size_t& end) {
    std::size_t i = pos_ + 1;
    auto number = [&](std::uint64_t& v, bool& any) {
      any = false;
      v = 0;
      while (i < p_.size() && is_digit(p_[i])) {
        any = true;
        if (v < 0x1'0000'0000ull) v = v * 10 + (p_[i] - U'0');
        ++i;
      }
    };
    std::uint64_t a = 0, b = 0;
    bool has_a = false, has_b = false;
    number(a, has_a);
    bool comma = false;
    if (i < p_.size() && p_[i] == U',') {
      comma = true;
      ++i;
      number(b, has_b);
    }
    if (i >= p_.size() || p_[i] != U'}') return false;
    if (!comma && !has_a) return false;
    end = i + 1;
    const std::size_t count_pos = pos_ + 1;
    if (a >= 0xFFFFFFFFull || b >= 0xFFFFFFFFull) { fail("repeat count too big", count_pos); return true; }
    lo = has_a ? static_cast<std::uint32_t>(a) : 0;
    hi = comma ? (has_b ? static_cast<std::uint32_t>(b) : unbounded) : lo;
    if (hi < lo) fail("min repeat greater than max repeat", count_pos);
    return true;
  }

  constexpr bool quantifier_here(std::uint32_t& lo, std::uint32_t& hi, std::size_t& end) {
    const char32_t c = peek();
    if (at_end()) return false;
    if (c == U'*') { lo = 0; hi = unbounded; end = pos_ + 1; return true; }
    if (c == U'+') { lo = 1; hi = unbounded; end = pos_ + 1; return true; }
    if (c == U'?') { lo = 0; hi = 1; end = pos_ + 1; return true; }
    if (c == U'{') return brace_repeat(lo, hi, end);
    return false;
  }

  constexpr std::uint32_t parse_seq(int depth) {
    node seq;
    seq.kind = node_kind::concat;
    while (!error && !at_end() && peek() != U'|' && peek() != U')') {
      std::uint32_t lo = 0, hi = 0;
      std::size_t end = 0;
      if (quantifier_here(lo, hi, end)) { fail("nothing to repeat", pos_); break; }
      auto atom = parse_atom(depth);
      if (error) break;
      if (quantifier_here(lo, hi, end)) {
        if (error) break;
        pos_ = end;
        if (!at_end() && peek() == U'?') ++pos_;  // lazy: the same set of matches for a yes/no answer
        else if (!at_end() && peek() == U'+') { unsupported("possessive quantifier", pos_); break; }
        std::uint32_t lo2 = 0, hi2 = 0;
        std::size_t end2 = 0;
        if (quantifier_here(lo2, hi2, end2)) { fail("multiple repeat", pos_); break; }
        node rep;
        rep.kind = node_kind::repeat;
        rep.min = lo;
        rep.max = hi;
        rep.kids.push_back(atom);
        atom = add(std::move(rep));
      }
      seq.kids.push_back(atom);
    }
    if (seq.kids.size() == 1) return seq.kids[0];
    return add(std::move(seq));
  }

  constexpr std::uint32_t parse_group(int depth) {
    const std::size_t open = pos_;
    ++pos_;  // '('
    if (peek() == U'?' && !at_end()) {
      ++pos_;
      if (at_end()) { fail("unknown extension", pos_); return 0; }
      const char32_t c = peek();
      if (c == U':') {
        ++pos_;
      } else if (c == U'P' && peek(1) == U'<') {
        pos_ += 2;
        if (!skip_group_name()) return 0;
        ++groups_;
      } else if (c == U'<' && peek(1) != U'=' && peek(1) != U'!') {
        ++pos_;
        if (!skip_group_name()) return 0;
        ++groups_;
      } else {
        std::string_view what = "this (?...) extension";
        if (c == U'=') what = "lookahead (?=...)";
        else if (c == U'!') what = "negative lookahead (?!...)";
        else if (c == U'<') what = "lookbehind (?<=...) / (?<!...)";
        else if (c == U'>') what = "atomic group (?>...)";
        else if (c == U'#') what = "comment group (?#...)";
        else if (c == U'P') what = "named backreference or (?P...) extension";
        else if (c == U'|') what = "branch reset (?|...)";
        else if (c == U'(') what = "conditional (?(...)...)";
        else what = "inline flags or (?...) extension";
        unsupported(what, open);
        return 0;
      }
    } else {
      ++groups_;
    }
    const auto inner = parse_alt(depth + 1);
    if (error) return inner;
    if (at_end()) { fail("missing )", pos_); return inner; }
    ++pos_;  // ')'
    return inner;
  }

  constexpr bool skip_group_name() {
    const std::size_t start = pos_;
    while (!at_end() && peek() != U'>') ++pos_;
    if (at_end() || pos_ == start) { fail("missing group name", pos_); return false; }
    ++pos_;
    return true;
  }

  constexpr std::uint32_t parse_atom(int depth) {
    const char32_t c = peek();
    if (c == U'(') return parse_group(depth);
    if (c == U'[') return parse_set();
    if (c == U'.') {
      ++pos_;
      node n;
      n.kind = node_kind::any;
      return add(std::move(n));
    }
    if (c == U'^') { ++pos_; return assertion(op::at_begin); }
    if (c == U'$') { ++pos_; return assertion(op::at_dollar); }
    if (c == U'\\') return parse_escape();
    ++pos_;
    return literal(c);
  }

  constexpr std::uint32_t assertion(op a) {
    node n;
    n.kind = node_kind::assertion;
    n.assertion = a;
    if (a == op::word_edge || a == op::not_word_edge) uses_word_edges = true;
    return add(std::move(n));
  }

  static constexpr int hex_value(char32_t c) {
    if (c >= U'0' && c <= U'9') return static_cast<int>(c - U'0');
    if (c >= U'a' && c <= U'f') return static_cast<int>(c - U'a' + 10);
    if (c >= U'A' && c <= U'F') return static_cast<int>(c - U'A' + 10);
    return -1;
  }

  // Fills `s` for a class escape (\d \w \s and negations); returns false when `e` is not one.
  static constexpr bool class_escape(char32_t e, char_set& s) {
    char_set base;
    if (e == U'd' || e == U'D') base.add(U'0', U'9');
    else if (e == U'w' || e == U'W') { base.add(U'a', U'z'); base.add(U'A', U'Z'); base.add(U'0', U'9'); base.add(U'_', U'_'); }
    else if (e == U's' || e == U'S') { base.add(U' ', U' '); base.add(U'\t', U'\r'); base.add(0x1C, 0x1F); }
    else return false;
    if (e == U'D' || e == U'W' || e == U'S') s.add_ascii_complement_of(base);
    else { s.ascii[0] |= base.ascii[0]; s.ascii[1] |= base.ascii[1]; }
    s.unicode_class = true;
    return true;
  }

  // One escaped character (after the backslash at `pos_ - 1`); `in_set` changes \b and the anchors.
  // Returns the code point, or nullopt after an error.
  constexpr std::optional<char32_t> escaped_char(char32_t e, bool in_set) {
    switch (e) {
      case U'a': return char32_t{7};
      case U'f': return char32_t{12};
      case U'n': return char32_t{10};
      case U'r': return char32_t{13};
      case U't': return char32_t{9};
      case U'v': return char32_t{11};
      case U'b': if (in_set) return char32_t{8}; break;
      default: break;
    }
    if (e == U'x' || e == U'u' || e == U'U') {
      const int digits = e == U'x' ? 2 : e == U'u' ? 4 : 8;
      const std::size_t start = pos_;
      std::uint32_t v = 0;
      for (int k = 0; k < digits; ++k) {
        const int h = hex_value(peek());
        if (at_end() || h < 0) {
          std::string shown = "incomplete escape \\";
          text::append_utf8(shown, e);
          for (std::size_t q = start; q < pos_; ++q) text::append_utf8(shown, p_[q]);
          fail(shown, start);
          return std::nullopt;
        }
        v = v * 16 + static_cast<std::uint32_t>(h);
        ++pos_;
      }
      if (v > 0x10FFFF) { fail("bad escape \\U", start); return std::nullopt; }
      return static_cast<char32_t>(v);
    }
    if (e == U'0') {  // \0, \0o, \0oo
      std::uint32_t v = 0;
      for (int k = 0; k < 2 && peek() >= U'0' && peek() <= U'7' && !at_end(); ++k) v = v * 8 + (p_[pos_++] - U'0');
      return static_cast<char32_t>(v);
    }
    if (e >= U'1' && e <= U'9') {
      if (peek() >= U'0' && peek() <= U'7' && peek(1) >= U'0' && peek(1) <= U'7' && e <= U'7' && pos_ + 1 < p_.size()) {
        const std::uint32_t v = (e - U'0') * 64 + (p_[pos_] - U'0') * 8 + (p_[pos_ + 1] - U'0');
        pos_ += 2;
        return static_cast<char32_t>(v);
      }
      std::uint32_t group = e - U'0';
      while (!at_end() && is_digit(peek())) group = group * 10 + (p_[pos_++] - U'0');
      if (in_set || group > groups_) fail("invalid group reference", pos_);
      else unsupported("backreference", pos_);
      return std::nullopt;
    }
    const bool letter = (e >= U'a' && e <= U'z') || (e >= U'A' && e <= U'Z');
    if (!letter) return e;  // escaped punctuation, digits handled above, non-ASCII: the character itself
    constexpr std::u32string_view regex_knows = U"ghmpzGKMNPRX";  // valid in `regex`, not run here
    if (!in_set && regex_knows.find(e) != std::u32string_view::npos) {
      std::string what = "escape \\";
      text::append_utf8(what, e);
      unsupported(what, pos_ - 2);
      return std::nullopt;
    }
    if (in_set && (e == U'N' || e == U'p' || e == U'P')) {
      std::string what = "escape \\";
      text::append_utf8(what, e);
      unsupported(what, pos_ - 2);
      return std::nullopt;
    }
    std::string shown = "bad escape \\";
    text::append_utf8(shown, e);
    fail(shown, pos_);
    return std::nullopt;
  }

  constexpr std::uint32_t parse_escape() {
    ++pos_;  // '\'
    if (at_end()) { fail("bad escape (end of pattern)", pos_); return 0; }
    const char32_t e = p_[pos_++];
    switch (e) {
      case U'A': return assertion(op::at_begin);
      case U'Z': return assertion(op::at_end);
      case U'b': return assertion(op::word_edge);
      case U'B': return assertion(op::not_word_edge);
      default: break;
    }
    char_set s;
    if (class_escape(e, s)) return add_set(std::move(s));
    const auto c = escaped_char(e, false);
    if (!c) return 0;
    return literal(*c);
  }

  /// Where a POSIX class `[:...:]` starting at pos_ ends (one past its ']'), or 0 when there is none.
  constexpr std::size_t posix_class_end() const {
    if (peek() != U'[' || peek(1) != U':') return 0;
    auto name_part = [](char32_t c, bool qualified) {
      return is_digit(c) || (c | 0x20u) - U'a' < 26u || c == U' ' || c == U'&' || c == U'_' || c == U'-' || c == U'.' ||
             (qualified && c == U'/');
    };
    std::size_t i = pos_ + 2;
    if (i < p_.size() && p_[i] == U'^') ++i;
    while (i < p_.size() && name_part(p_[i], false)) ++i;
    if (i < p_.size() && (p_[i] == U':' || p_[i] == U'=')) {
      std::size_t j = i + 1;
      bool named = false;
      for (; j < p_.size() && name_part(p_[j], true); ++j) named = named || p_[j] != U' ';
      if (named) i = j;  // a qualified name; else the ':' is the closing one
    }
    return i + 1 < p_.size() && p_[i] == U':' && p_[i + 1] == U']' ? i + 2 : 0;
  }

  constexpr std::uint32_t parse_set() {
    ++pos_;  // '['
    char_set s;
    if (!at_end() && peek() == U'^') { s.negated = true; ++pos_; }
    bool first = true;
    // One set item: a literal code point, or a class escape merged into `s` (returns nullopt then).
    auto item = [&](bool& was_class) -> std::optional<char32_t> {
      was_class = false;
      const char32_t c = p_[pos_++];
      if (c != U'\\') return c;
      if (at_end()) { fail("bad escape (end of pattern)", pos_); return std::nullopt; }
      const char32_t e = p_[pos_++];
      if (class_escape(e, s)) { was_class = true; return std::nullopt; }
      if (e == U'A' || e == U'Z' || e == U'B') {
        std::string shown = "bad escape \\";
        text::append_utf8(shown, e);
        fail(shown, pos_);
        return std::nullopt;
      }
      return escaped_char(e, true);
    };
    while (true) {
      if (at_end()) { fail("unterminated character set", pos_); return 0; }
      if (peek() == U']' && !first) { ++pos_; break; }
      first = false;
      // `[:name:]` in a set is a POSIX class for the `regex` package vLLM compiles with (Python's `re`
      // reads it as the characters '[', ':', ...): refused rather than matched as `re` would. The form
      // is the package's parse_posix_class: '[:', an optional '^', a property name (letters, digits and
      // " &_-."), optionally qualified after ':' or '=' (those and '/'), then ':]'; anything else leaves
      // '[' a literal, as there.
      if (const auto end = posix_class_end(); end) {
        std::string shown;
        for (std::size_t k = pos_; k < end; ++k) text::append_utf8(shown, p_[k]);
        unsupported("the POSIX character class " + shown + " (the regex package reads it as a Unicode property)", pos_);
        return 0;
      }
      bool lo_class = false;
      const auto lo = item(lo_class);
      if (error) return 0;
      if (!at_end() && peek() == U'-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != U']') {
        ++pos_;  // '-'
        bool hi_class = false;
        const auto hi = item(hi_class);
        if (error) return 0;
        if (lo_class || hi_class) { unsupported("a class escape as a range endpoint", pos_); return 0; }
        if (*hi < *lo) { fail("bad character range", pos_); return 0; }
        s.add(*lo, *hi);
      } else if (!lo_class) {
        s.add(*lo, *lo);
      }
    }
    return add_set(std::move(s));
  }
};

}  // namespace detail

/// How a compiled pattern ends: at any point (re:, start-anchored only) or only at the end of the name.
enum class anchoring : std::uint8_t { prefix, whole };

/// Compiles `pattern` (Python syntax) as an alternative of pattern `owner` in `prog`.
/// `dotall` makes '.' match '\n' (used for globs). Returns the error, if any; `prog` is then unchanged.
constexpr maybe<regex_error> compile_regex(program& prog, std::string_view pattern, std::uint32_t owner,
                                                   anchoring end, bool dotall = false) {
  auto decoded = text::decode_utf8(pattern);
  if (!decoded.ok()) return regex_error{"pattern is not valid UTF-8", false};
  detail::regex_parser parser(std::move(decoded.code_points), dotall);
  const auto root = parser.parse();
  if (parser.error) return parser.error;
  const auto saved_insts = prog.insts.size();
  const auto saved_sets = prog.sets.size();
  const auto set_base = static_cast<std::uint32_t>(prog.sets.size());
  for (auto& s : parser.sets) prog.sets.push_back(std::move(s));
  detail::emitter em(prog, parser.nodes, set_base, owner, dotall);
  if (end == anchoring::whole) {
    // An alternative of an earlier compile for the same owner is joined by the caller through split.
    em.emit(root);
    em.push({op::at_end, 0, 0});
  } else {
    em.emit(root);
  }
  em.push({op::match, owner, 0});
  if (em.too_large || prog.insts.size() > max_program_size * 4) {
    prog.insts.resize(saved_insts);
    prog.owner.resize(saved_insts);
    prog.sets.resize(saved_sets);
    return regex_error{"unsupported regex: the pattern is too large for qpolicy's matcher once its counted "
                       "repetitions are expanded (limit " + text::to_decimal(max_program_size) + " instructions)",
                       true};
  }
  prog.uses_word_edges |= parser.uses_word_edges;
  return std::nullopt;
}

}  // namespace qpolicy::match
