#pragma once
// A constexpr port of the `regex` package's V0 parser (_regex_core.py: parse_sequence, parse_paren,
// parse_escape, parse_set, ...) for the language qpolicy runs: literals, classes with properties and
// POSIX classes, quantifiers (greedy, lazy, possessive), groups, backreferences, lookaround, atomic
// groups, conditionals, inline flags (i m s x a u L, positional and scoped) and comments. Errors are the
// package's texts at the package's positions; constructs qpolicy does not run (fuzzy matching,
// recursion, branch reset, verbs, named characters, scripts and blocks other than ASCII) are refused as
// unsupported, naming the construct, rather than mis-matched.
//
// Over the usual file size on purpose: one class whose functions follow _regex_core.py's one for one
// (same names, same order of checks, same error positions), so that it can be read side by side with
// the package; the checks over the finished tree are in regex_quirks.hpp.
#include <optional>
#include <string>
#include <string_view>

#include "qpolicy/core/detail/lean_vector.hpp"
#include "qpolicy/core/detail/maybe.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/match/detail/regex_ast.hpp"
#include "qpolicy/match/detail/regex_quirks.hpp"
#include "qpolicy/match/detail/regex_source.hpp"

namespace qpolicy::match {

/// A pattern the matcher refused: either invalid for the `regex` package too (`unsupported == false`,
/// message as the package words it), or valid there but not run by qpolicy.
struct regex_error {
  std::string message;
  bool unsupported = false;
};

namespace detail {

/// The package's flag bits (RegexFlag), for the scoped flags and the ones qpolicy refuses.
namespace flag {
inline constexpr std::uint32_t ascii = 0x80, ignorecase = 0x2, locale = 0x4, multiline = 0x8, dotall = 0x10,
                               unicode = 0x20, verbose = 0x40, fullcase = 0x4000, word = 0x800, bestmatch = 0x1000,
                               enhancematch = 0x8000, posix = 0x10000, reverse = 0x400, version0 = 0x2000,
                               version1 = 0x100;
inline constexpr std::uint32_t encodings = ascii | locale | unicode;
inline constexpr std::uint32_t global = version0 | version1 | bestmatch | enhancematch | posix | reverse;
}  // namespace flag

class regex_parser {
 public:
  constexpr regex_parser(lean_vector<char32_t> pattern, bool dotall) : src_(std::move(pattern)) {
    nodes.reserve(2 * src_.size() + 2);
    if (dotall) flags_ |= flag::dotall;
  }

  lean_vector<node> nodes;
  lean_vector<char_set> sets;
  maybe<regex_error> error;
  std::uint32_t group_count = 0;
  bool final_ascii = false;  // the pattern's flags after parsing select ASCII (or LOCALE) semantics

  constexpr std::uint32_t parse() {
    const auto root = parse_pattern();
    if (error) return root;
    if (!src_.at_end()) { fail("unbalanced parenthesis", src_.pos); return root; }
    const std::uint32_t enc = flags_ & flag::encodings;
    if (enc != 0 && enc != flag::ascii && enc != flag::locale && enc != flag::unicode) {
      error = regex_error{"ASCII, LOCALE and UNICODE flags are mutually incompatible", false};
      return root;
    }
    final_ascii = enc == flag::ascii;
    fix_groups();
    if (error) return root;
    // Under LOCALE the package asks the C library about classes and cases (with quirks of its own,
    // such as \p{L} never holding): qpolicy runs LOCALE patterns only when nothing depends on it.
    if (enc == flag::locale && encoding_dependent_) {
      unsupported("the LOCALE flag (?L) with classes, word boundaries or IGNORECASE (they depend on the C locale)",
                  0);
      return root;
    }
    // The package's repeat guards skip retrying a lazy repeat over a capturing body that can match empty once
    // a lookaround condition after it failed; when captures are read back that loses matches a plain
    // search finds. Refused.
    if (lazy_nullable_and_look_condition(nodes)) {
      unsupported("a lookaround conditional after a lazy repeat of a group that can match empty (the "
                  "regex package's repeat guards skip matches there)",
                  0);
      return root;
    }
    // The package's first-character prefilter (_check_firstset) merges the case flags of the items
    // that can start a match: a case-sensitive negated class among them is then read case-insensitively
    // and rejects characters the pattern matches. Refused, not mis-matched.
    if (prefilter_folds_negated_class(nodes, sets, root)) {
      unsupported("a negated class among the first items of a pattern that has case-insensitive first items, "
                  "case-sensitive or with a negative cased property (the regex package's first-character "
                  "prefilter reads it differently)",
                  0);
      return root;
    }
    for (auto& s : sets) {
      for (auto& c : s.classes)
        if (c.deferred) c.ascii = final_ascii;
      s.fold_ascii = final_ascii;
      s.finish();
    }
    return root;
  }

 private:
  regex_source src_;
  std::uint32_t flags_ = 0;
  int depth_ = 0;
  lean_vector<std::pair<std::u32string, std::uint32_t>> group_index_;
  lean_vector<std::uint32_t> open_groups_;
  lean_vector<std::uint32_t> open_group_count_{0};
  struct group_ref {
    std::uint32_t node;
    std::u32string name;
    std::size_t position;
    bool conditional;
  };
  lean_vector<group_ref> refs_;
  bool encoding_dependent_ = false;  // some item reads the pattern's final encoding

  static constexpr std::uint32_t none = 0xFFFFFFFFu;  // parse_sequence's None marker

  // ---- errors ----
  constexpr void fail(std::string_view what, std::size_t at) {
    if (error) return;
    std::string m = std::string(what) + " at position " + text::to_decimal(static_cast<long long>(at));
    // The package adds the line and column whenever the pattern has a newline.
    const auto& s = src_.text();
    bool multiline = false;
    std::size_t line = 1, last_nl = 0;
    bool seen_nl = false;
    for (std::size_t k = 0; k < s.size(); ++k) {
      if (s[k] != U'\n') continue;
      multiline = true;
      if (k < at) { ++line; last_nl = k; seen_nl = true; }
    }
    if (multiline) {
      const std::size_t column = seen_nl ? at - last_nl : at + 1;
      m += " (line " + text::to_decimal(static_cast<long long>(line)) + ", column " +
           text::to_decimal(static_cast<long long>(column)) + ")";
    }
    error = regex_error{std::move(m), false};
  }
  constexpr void unsupported(std::string_view what, std::size_t at) {
    if (!error)
      error = regex_error{"unsupported regex syntax at position " + text::to_decimal(static_cast<long long>(at)) +
                              ": " + std::string(what) +
                              " (qpolicy runs the regex package's language without fuzzy matching, recursion, "
                              "branch reset, verbs, named characters, and properties other than the general "
                              "categories, POSIX classes and the ASCII block)",
                          true};
  }
  constexpr void expect(std::u32string_view what) {
    if (error || src_.match(what)) return;
    std::string m = "missing ";
    for (char32_t c : what) text::append_utf8(m, c);
    fail(m, src_.pos);
  }

  // ---- nodes ----
  constexpr std::uint32_t add(node n) {
    nodes.push_back(std::move(n));
    return static_cast<std::uint32_t>(nodes.size() - 1);
  }
  // Made in place, not moved in: a node (with its vector) made, moved and destroyed costs thousands
  // of steps during constant evaluation, once per character of a pattern.
  constexpr node& make_in_place(node_kind k) {
    node& n = nodes.emplace_back();
    n.kind = k;
    return n;
  }
  constexpr std::uint32_t last_id() const { return static_cast<std::uint32_t>(nodes.size() - 1); }
  constexpr std::uint32_t make(node_kind k, std::uint32_t value = 0) {
    make_in_place(k).value = value;
    return last_id();
  }
  constexpr std::uint32_t make1(node_kind k, std::uint32_t kid) {
    make_in_place(k).kids.push_back(kid);
    return last_id();
  }
  constexpr bool ignorecase() const { return (flags_ & flag::ignorecase) != 0; }
  constexpr encoding item_encoding() const {
    if (flags_ & flag::ascii) return encoding::ascii;
    if (flags_ & flag::unicode) return encoding::unicode;
    return encoding::deferred;
  }
  // make_character outside a set: a literal with the current case flags.
  constexpr std::uint32_t character(char32_t c) {
    encoding_dependent_ = encoding_dependent_ || ignorecase();
    node& n = make_in_place(node_kind::literal);
    n.value = static_cast<std::uint32_t>(c);
    n.fold = ignorecase();
    return last_id();
  }
  constexpr std::uint32_t assertion(op a) {
    node n;
    n.kind = node_kind::assertion;
    n.assertion = a;
    // \m and \M follow the pattern's final encoding even inside (?a:...), as the package's engine does.
    n.enc = (a == op::word_start || a == op::word_end) ? encoding::deferred : item_encoding();
    if ((a == op::word_edge || a == op::not_word_edge || a == op::word_start || a == op::word_end) &&
        n.enc == encoding::deferred)
      encoding_dependent_ = true;
    return add(std::move(n));
  }
  constexpr std::uint32_t set_node(char_set s) {
    sets.push_back(std::move(s));
    return make(node_kind::set, static_cast<std::uint32_t>(sets.size() - 1));
  }
  constexpr char_set new_set() {
    encoding_dependent_ = encoding_dependent_ || ignorecase();
    char_set s;
    s.fold = ignorecase();
    return s;
  }
  // A property outside a set (\d, \p{..}): a one-item set with the current case flags.
  // A property item with the encoding of where it was written (POSIX classes always take the
  // pattern's final encoding: parse_posix_class passes none).
  constexpr class_item item(std::uint32_t key, bool positive, bool posix = false) {
    const auto enc = posix ? encoding::deferred : item_encoding();
    if (enc == encoding::deferred) encoding_dependent_ = true;
    return {key, positive, enc == encoding::ascii, enc == encoding::deferred};
  }
  constexpr std::uint32_t property_node(std::uint32_t key, bool positive) {
    char_set s = new_set();
    s.classes.push_back(item(key, positive));
    return set_node(std::move(s));
  }
  // ---- structure ----
  constexpr std::uint32_t parse_pattern() {
    if (++depth_ > 200) { unsupported("groups nested more than 200 deep", src_.pos); --depth_; return make(node_kind::empty); }
    node alt;
    alt.kind = node_kind::alt;
    alt.kids.push_back(parse_sequence());
    while (!error && src_.match(U"|")) alt.kids.push_back(parse_sequence());
    --depth_;
    if (alt.kids.size() == 1) return alt.kids[0];
    return add(std::move(alt));
  }

  static constexpr bool is_special(char32_t c) {
    return c == end_of_pattern || c == U'(' || c == U')' || c == U'|' || c == U'?' || c == U'*' || c == U'+' ||
           c == U'{' || c == U'^' || c == U'$' || c == U'.' || c == U'[' || c == U'\\' || c == U'#';
  }

  constexpr std::uint32_t parse_sequence() {
    lean_vector<std::uint32_t> seq{none};
    while (!error) {
      const std::size_t saved_pos = src_.pos;
      const char32_t ch = src_.get();
      if (!is_special(ch)) { seq.push_back(character(ch)); continue; }
      if (ch == end_of_pattern || ch == U')' || ch == U'|') { src_.pos = saved_pos; break; }
      if (ch == U'\\') {
        const auto e = parse_escape(false);
        if (e.node != none) seq.push_back(e.node);
      } else if (ch == U'(') {
        const auto element = parse_paren();
        if (element != none) seq.push_back(element);
      } else if (ch == U'.') {
        make_in_place(node_kind::any).dotall = (flags_ & flag::dotall) != 0;
        seq.push_back(last_id());
      } else if (ch == U'[') {
        seq.push_back(parse_set());
      } else if (ch == U'^') {
        seq.push_back(assertion((flags_ & flag::multiline) ? op::line_begin : op::at_begin));
      } else if (ch == U'$') {
        seq.push_back(assertion((flags_ & flag::multiline) ? op::line_end : op::at_dollar));
      } else if (ch == U'?' || ch == U'*' || ch == U'+' || ch == U'{') {
        std::uint32_t lo = 0, hi = 0;
        if (parse_quantifier(ch, lo, hi)) {
          apply_quantifier(seq, lo, hi, saved_pos);
          seq.push_back(none);
        } else if (!error && ch == U'{' && looks_fuzzy()) {
          unsupported("fuzzy matching {...}", saved_pos);
        } else {
          seq.push_back(character(ch));
        }
      } else {
        seq.push_back(character(ch));  // '#' outside VERBOSE
      }
    }
    // The items without the markers, moved into the concatenation (one vector, no copies).
    std::uint32_t* items = seq.data();
    std::size_t kept = 0;
    for (std::size_t k = 0, n = seq.size(); k < n; ++k)
      if (items[k] != none) items[kept++] = items[k];
    if (kept == 1) return items[0];
    seq.resize(kept);
    make_in_place(node_kind::concat).kids = std::move(seq);
    return last_id();
  }

  // parse_fuzzy's first item: a cost letter with a comparison, or a number compared to one.
  constexpr bool looks_fuzzy() const {
    std::size_t i = src_.pos;
    const auto& s = src_.text();
    while (i < s.size() && s[i] == U' ') ++i;
    if (i < s.size() && (s[i] == U'd' || s[i] == U'e' || s[i] == U'i' || s[i] == U's')) {
      const std::size_t j = i + 1;
      return j < s.size() && (s[j] == U'<' || s[j] == U'=' || s[j] == U'}' || s[j] == U',' || s[j] == U'>');
    }
    std::size_t j = i;
    while (j < s.size() && s[j] >= U'0' && s[j] <= U'9') ++j;
    return j > i && j < s.size() && s[j] == U'<';
  }

  constexpr bool parse_quantifier(char32_t ch, std::uint32_t& lo, std::uint32_t& hi) {
    if (ch == U'?') { lo = 0; hi = 1; return true; }
    if (ch == U'*') { lo = 0; hi = unbounded; return true; }
    if (ch == U'+') { lo = 1; hi = unbounded; return true; }
    // parse_limited_quantifier
    const std::size_t saved_pos = src_.pos;
    auto digits = [](char32_t c) { return c >= U'0' && c <= U'9'; };
    auto to_count = [](const std::u32string& d, bool& big) {
      std::uint64_t v = 0;
      for (char32_t c : d) {
        v = v * 10 + (c - U'0');
        if (v >= 0xFFFFFFFFull) { big = true; v = 0xFFFFFFFFull; }
      }
      return v;
    };
    bool big = false;
    const auto min_text = src_.get_while(digits);
    std::uint64_t mn = 0, mx = 0;
    bool unlimited = false;
    if (src_.match(U",")) {
      const auto max_text = src_.get_while(digits);
      mn = min_text.empty() ? 0 : to_count(min_text, big);
      if (max_text.empty()) unlimited = true;
      else mx = to_count(max_text, big);
    } else {
      if (min_text.empty()) { src_.pos = saved_pos; return false; }
      mn = mx = to_count(min_text, big);
    }
    if (!src_.match(U"}")) { src_.pos = saved_pos; return false; }
    if (big) { fail("repeat count too big", saved_pos); return false; }
    if (!unlimited && mn > mx) { fail("min repeat greater than max repeat", saved_pos); return false; }
    lo = static_cast<std::uint32_t>(mn);
    hi = unlimited ? unbounded : static_cast<std::uint32_t>(mx);
    return true;
  }

  constexpr void apply_quantifier(lean_vector<std::uint32_t>& seq, std::uint32_t lo, std::uint32_t hi,
                                  std::size_t saved_pos) {
    const auto element = seq.back();
    seq.pop_back();
    if (element == none) {
      fail(seq.empty() ? "nothing to repeat" : "multiple repeat", saved_pos);
      return;
    }
    const std::size_t suffix_pos = src_.pos;
    const char32_t ch = src_.get();
    bool lazy = false, possessive = false;
    if (ch == U'?') lazy = true;
    else if (ch == U'+') possessive = true;
    else src_.pos = suffix_pos;
    if (is_empty(nodes, element) || (lo == 1 && hi == 1)) {
      seq.push_back(element);
      return;
    }
    node rep;
    rep.kind = node_kind::repeat;
    rep.min = lo;
    rep.max = hi;
    rep.lazy = lazy;
    rep.kids.push_back(element);
    auto id = add(std::move(rep));
    if (possessive) id = make1(node_kind::atomic, id);
    seq.push_back(id);
  }

  // A group body with the flags restored afterwards (every parenthesised form does this).
  constexpr std::uint32_t body_then_close() {
    const auto saved = flags_;
    const auto inner = parse_pattern();
    expect(U")");
    flags_ = saved;
    src_.ignore_space = (flags_ & flag::verbose) != 0;
    return inner;
  }

  constexpr std::uint32_t capture(const std::u32string* name) {
    const std::uint32_t group = open_group(name);
    if (error) return 0;
    const auto inner = body_then_close();
    open_groups_.pop_back();
    node n;
    n.kind = node_kind::group;
    n.value = group;
    n.kids.push_back(inner);
    return add(std::move(n));
  }

  constexpr std::uint32_t open_group(const std::u32string* name) {
    std::uint32_t group = 0;
    if (name)
      for (const auto& [n, g] : group_index_)
        if (n == *name) group = g;
    if (group == 0) {
      group = ++group_count;
      if (name) group_index_.emplace_back(*name, group);
      open_group_count_.push_back(0);
    }
    for (auto g : open_groups_)
      if (g == group) {
        unsupported("a named group nested inside a group of the same name", src_.pos);
        return 0;
      }
    open_groups_.push_back(group);
    ++open_group_count_[group];
    return group;
  }
  constexpr bool is_open_group(const std::u32string& name) const {
    std::uint32_t group = 0;
    if (all_digits(name)) {
      std::uint64_t v = 0;
      for (char32_t c : name) v = v < 0x1'0000'0000ull ? v * 10 + (c - U'0') : v;
      group = v > 0xFFFFFFFFull ? 0 : static_cast<std::uint32_t>(v);
    } else {
      for (const auto& [n, g] : group_index_)
        if (n == name) group = g;
    }
    for (auto g : open_groups_)
      if (g == group && group != 0) return true;
    return false;
  }
  static constexpr bool all_digits(const std::u32string& s) {
    if (s.empty()) return false;
    for (char32_t c : s)
      if (c < U'0' || c > U'9') return false;
    return true;
  }

  // parse_name: a group name or number; empty after an error (an empty name is one). Not an
  // optional<u32string>: nvcc's front end does not take that as a literal type in constexpr code.
  constexpr std::u32string parse_name(bool allow_numeric) {
    auto name = src_.get_while([](char32_t c) { return c == U')' || c == U'>'; }, false);
    if (name.empty()) { fail("missing group name", src_.pos); return {}; }
    if (all_digits(name)) {
      bool zero = true;
      for (char32_t c : name) zero = zero && c == U'0';
      if (!allow_numeric || zero) { fail("bad character in group name", src_.pos); return {}; }
    } else if (!is_identifier(name)) {
      fail("bad character in group name", src_.pos);
      return {};
    }
    return name;
  }
  // str.isidentifier: a letter, letter number or '_', then those, marks, digits and connectors.
  static constexpr bool is_identifier(const std::u32string& s) {
    if (s.empty()) return false;
    using namespace unicode;
    auto gc = [](std::uint32_t v) { return (general_category_property << 16) | v; };
    auto start = [&](char32_t c) {
      if (c < 128) return (c | 0x20u) - U'a' < 26u || c == U'_';
      return has_property(gc(0x1f), c) || has_property(gc(0x19), c);  // L, Nl
    };
    for (std::size_t k = 0; k < s.size(); ++k) {
      const char32_t c = s[k];
      if (k == 0 ? start(c)
                 : start(c) || (c >= U'0' && c <= U'9') ||
                       (c >= 128 && (has_property(gc(0x16), c) || has_property(gc(0x18), c) ||
                                     has_property(gc(0x09), c) || has_property(gc(0x0c), c))))  // Mn Mc Nd Pc
        continue;
      return false;
    }
    return true;
  }

  constexpr std::uint32_t ref_group(const std::u32string& name, std::size_t position, bool fold) {
    encoding_dependent_ = encoding_dependent_ || fold;
    node n;
    n.kind = node_kind::backref;
    n.fold = fold;
    const auto id = add(std::move(n));
    refs_.push_back({id, name, position, false});
    return id;
  }

  // Resolves backreferences and conditions once every group is known (fix_groups).
  constexpr void fix_groups() {
    for (const auto& r : refs_) {
      if (error) return;
      std::uint64_t group = 0;
      bool found = false;
      if (all_digits(r.name)) {
        for (char32_t c : r.name) group = group < 0x1'0000'0000ull ? group * 10 + (c - U'0') : group;
        found = true;
      } else {
        for (const auto& [n, g] : group_index_)
          if (n == r.name) { group = g; found = true; }
      }
      if (r.conditional) {
        if (!found) {
          if (r.name == U"DEFINE") { unsupported("(?(DEFINE)...)", r.position); return; }
          fail("unknown group", r.position);
          return;
        }
        if (group > group_count) { fail("invalid group reference", r.position); return; }
        if (group == 0) { unsupported("a condition on group 0", r.position); return; }
      } else {
        if (!found) { fail("unknown group", r.position); return; }
        if (group < 1 || group > group_count) { fail("invalid group reference", r.position); return; }
      }
      nodes[r.node].value = static_cast<std::uint32_t>(group);
    }
  }

  constexpr std::uint32_t lookaround(bool behind, bool positive) {
    const auto inner = body_then_close();
    node n;
    n.kind = node_kind::look;
    n.behind = behind;
    n.negative = !positive;
    n.kids.push_back(inner);
    return add(std::move(n));
  }

  constexpr std::uint32_t parse_paren() {
    const std::size_t saved_pos = src_.pos;
    char32_t ch = src_.get(true);
    if (ch == U'?') {
      const std::size_t saved_pos_2 = src_.pos;
      ch = src_.get(true);
      if (ch == U'<') {
        const std::size_t saved_pos_3 = src_.pos;
        ch = src_.get();
        if (ch == U'=' || ch == U'!') return lookaround(true, ch == U'=');
        src_.pos = saved_pos_3;
        const auto name = parse_name(false);
        if (name.empty()) return none;
        return named_group(name);
      }
      if (ch == U'=' || ch == U'!') return lookaround(false, ch == U'=');
      if (ch == U'P') return parse_extension();
      if (ch == U'#') return parse_comment();
      if (ch == U'(') return parse_conditional();
      if (ch == U'>') return make1(node_kind::atomic, body_then_close());
      if (ch == U'|') { unsupported("branch reset (?|...)", saved_pos_2 - 2); return none; }
      if (ch == U'R' || (ch >= U'0' && ch <= U'9') || ch == U'&' ||
          ((ch == U'+' || ch == U'-') && src_.peek() >= U'0' && src_.peek() <= U'9')) {
        unsupported("a group call or recursion (?R), (?1), (?&name)", saved_pos_2 - 2);
        return none;
      }
      src_.pos = saved_pos_2;
      return parse_flags_subpattern();
    }
    if (ch == U'*') {
      const std::size_t saved_pos_2 = src_.pos;
      const auto word = src_.get_while([](char32_t c) { return c == U')' || c == U'>'; }, false);
      if (!word.empty() && ((word[0] | 0x20u) - U'a' < 26u || word[0] >= 128)) {
        if (word != U"FAIL" && word != U"F" && word != U"PRUNE" && word != U"SKIP") {
          fail("unknown verb", saved_pos_2);
          return none;
        }
        unsupported("the verb (*" + narrow(word) + ")", saved_pos - 1);
        return none;
      }
    }
    src_.pos = saved_pos;
    return capture(nullptr);
  }

  static constexpr std::string narrow(const std::u32string& s) {
    std::string out;
    for (char32_t c : s) text::append_utf8(out, c);
    return out;
  }

  constexpr std::uint32_t named_group(const std::u32string& name) {
    expect(U">");
    if (error) return none;
    return capture(&name);
  }

  constexpr std::uint32_t parse_extension() {
    const std::size_t saved_pos = src_.pos;
    const char32_t ch = src_.get();
    if (ch == U'<') {
      const auto name = parse_name(false);
      if (name.empty()) return none;
      return named_group(name);
    }
    if (ch == U'=') {
      const auto name = parse_name(true);
      if (name.empty()) return none;
      expect(U")");
      if (error) return none;
      if (is_open_group(name)) { fail("cannot refer to an open group", saved_pos); return none; }
      return ref_group(name, saved_pos, ignorecase());
    }
    if (ch == U'>' || ch == U'&') { unsupported("a group call (?P>name)", saved_pos - 2); return none; }
    src_.pos = saved_pos;
    fail("unknown extension", saved_pos);
    return none;
  }

  constexpr std::uint32_t parse_comment() {
    while (true) {
      const std::size_t saved_pos = src_.pos;
      char32_t c = src_.get(true);
      if (c == end_of_pattern || c == U')') { src_.pos = saved_pos; break; }
      if (c == U'\\') c = src_.get(true);
    }
    expect(U")");
    return none;
  }

  constexpr std::uint32_t parse_conditional() {
    const auto saved_flags = flags_;
    const std::size_t saved_pos = src_.pos;
    char32_t ch = src_.get();
    std::uint32_t look = none;
    std::u32string name;
    if (ch == U'?') {
      ch = src_.get();
      bool behind = false;
      if (ch == U'<') {
        ch = src_.get();
        behind = true;
        if (ch != U'=' && ch != U'!') ch = 0;
      }
      if (ch != U'=' && ch != U'!') {
        src_.pos = saved_pos;
        fail("expected lookaround conditional", src_.pos);
        return none;
      }
      look = lookaround(behind, ch == U'=');
    } else {
      src_.pos = saved_pos;
      name = parse_name(true);
      if (name.empty()) return none;
      expect(U")");
    }
    if (error) return none;
    // The package checks a condition's group before the references in its branches (fix_groups visits
    // the conditional first): its entry goes in before theirs.
    const std::size_t ref_slot = refs_.size();
    if (look == none) refs_.push_back({none, name, saved_pos, true});
    const auto yes = parse_sequence();
    std::uint32_t no = make(node_kind::empty);
    if (!error && src_.match(U"|")) no = parse_sequence();
    expect(U")");
    // parse_conditional restores the flags after its branches; parse_lookaround_conditional does not,
    // so a positional flag in a lookaround condition's branch stays on after it, as there.
    if (look == none) {
      flags_ = saved_flags;
      src_.ignore_space = (flags_ & flag::verbose) != 0;
    }
    if (error) return none;
    node n;
    n.kind = node_kind::cond;
    n.kids = {yes, no};
    if (look != none) {
      n.kids.push_back(look);
      return add(std::move(n));
    }
    if (is_empty(nodes, yes) && is_empty(nodes, no)) {  // dropped at parse time there: never checked
      refs_.erase(refs_.begin() + static_cast<std::ptrdiff_t>(ref_slot));
      return make(node_kind::empty);
    }
    const auto id = add(std::move(n));
    refs_[ref_slot].node = id;
    return id;
  }

  // parse_flag_set: returns the bits, leaving pos after the last flag letter.
  constexpr std::uint32_t parse_flag_set() {
    std::uint32_t bits = 0;
    while (true) {
      const std::size_t saved_pos = src_.pos;
      char32_t ch = src_.get();
      std::uint32_t f = 0;
      switch (ch) {
        case U'a': f = flag::ascii; break;
        case U'b': f = flag::bestmatch; break;
        case U'e': f = flag::enhancematch; break;
        case U'f': f = flag::fullcase; break;
        case U'i': f = flag::ignorecase; break;
        case U'L': f = flag::locale; break;
        case U'm': f = flag::multiline; break;
        case U'p': f = flag::posix; break;
        case U'r': f = flag::reverse; break;
        case U's': f = flag::dotall; break;
        case U'u': f = flag::unicode; break;
        case U'w': f = flag::word; break;
        case U'x': f = flag::verbose; break;
        case U'V': {
          const char32_t v = src_.get();
          f = v == U'0' ? flag::version0 : v == U'1' ? flag::version1 : 0;
          break;
        }
        default: break;
      }
      if (!f) { src_.pos = saved_pos; return bits; }
      bits |= f;
    }
  }

  constexpr std::uint32_t parse_flags_subpattern() {
    const std::size_t start = src_.pos;
    const std::uint32_t on = parse_flag_set();
    std::uint32_t off = 0;
    if (src_.match(U"-")) {
      off = parse_flag_set();
      if (!off) { fail("bad inline flags: no flags after '-'", src_.pos); return none; }
    }
    if (off & flag::global) { fail("bad inline flags: cannot turn off global flag", src_.pos); return none; }
    if (on & off) { fail("bad inline flags: flag turned on and off", src_.pos); return none; }
    const std::uint32_t refused = (on | off) & (flag::fullcase | flag::word | flag::posix | flag::reverse | flag::version1);
    if (refused) {
      std::string_view what = "the FULLCASE flag (?f)";
      if (refused & flag::word) what = "the WORD flag (?w)";
      if (refused & flag::posix) what = "the POSIX flag (?p)";
      if (refused & flag::reverse) what = "the REVERSE flag (?r)";
      if (refused & flag::version1) what = "version 1 behaviour (?V1)";
      unsupported(what, start - 2);
      return none;
    }
    const std::uint32_t scoped_on = on & ~flag::global;
    if (src_.match(U":")) {
      const auto saved = flags_;
      flags_ = (flags_ | scoped_on) & ~off;
      if (flags_ & flag::encodings) flags_ = (flags_ & ~flag::encodings) | scoped_on;
      src_.ignore_space = (flags_ & flag::verbose) != 0;
      const auto inner = parse_pattern();
      expect(U")");
      flags_ = saved;
      src_.ignore_space = (flags_ & flag::verbose) != 0;
      return inner;
    }
    if (src_.match(U")")) {
      flags_ = (flags_ | scoped_on) & ~off;
      src_.ignore_space = (flags_ & flag::verbose) != 0;
      return none;
    }
    fail("unknown extension", src_.pos);
    return none;
  }

  // ---- escapes ----
  static constexpr int hex_value(char32_t c) {
    if (c >= U'0' && c <= U'9') return static_cast<int>(c - U'0');
    if (c >= U'a' && c <= U'f') return static_cast<int>(c - U'a' + 10);
    if (c >= U'A' && c <= U'F') return static_cast<int>(c - U'A' + 10);
    return -1;
  }

  /// One escape (after the backslash). In a set it fills `set` and returns none; outside it returns
  /// the node. `item_char` receives the code point when the escape is a single character.
  struct escape_result {
    std::uint32_t node = none;
    std::optional<char32_t> character;  // a plain character (a range endpoint in a set)
  };

  constexpr escape_result parse_escape(bool in_set, char_set* set = nullptr) {
    const bool saved_ignore = src_.ignore_space;
    src_.ignore_space = false;
    const char32_t ch = src_.get();
    src_.ignore_space = saved_ignore;
    escape_result r;
    auto plain = [&](char32_t c) {
      r.character = c;
      if (!in_set) r.node = character(c);
      return r;
    };
    if (ch == end_of_pattern) { fail("bad escape (end of pattern)", src_.pos); return r; }
    if (ch == U'x' || ch == U'u' || ch == U'U') {
      const int digits = ch == U'x' ? 2 : ch == U'u' ? 4 : 8;
      const std::size_t saved_pos = src_.pos;
      std::string shown;
      std::uint64_t v = 0;
      for (int k = 0; k < digits; ++k) {
        const char32_t d = src_.get();
        if (d == end_of_pattern || hex_value(d) < 0) {
          std::string m = "incomplete escape \\";
          text::append_utf8(m, ch);
          fail(m + shown, saved_pos);
          return r;
        }
        text::append_utf8(shown, d);
        v = v * 16 + static_cast<std::uint64_t>(hex_value(d));
      }
      if (v >= 0x110000) {
        std::string m = "bad hex escape \\";
        text::append_utf8(m, ch);
        fail(m + shown, saved_pos);
        return r;
      }
      return plain(static_cast<char32_t>(v));
    }
    if (ch == U'g' && !in_set) {
      const std::size_t saved_pos = src_.pos;
      if (auto ref = parse_group_ref()) {
        r.node = *ref;
        return r;
      }
      src_.pos = saved_pos;  // not a group reference: a literal 'g'
      return plain(U'g');
    }
    if (ch == U'G' && !in_set) { r.node = assertion(op::at_begin); return r; }  // the search anchor: 0 for match
    if (ch == U'L' && !in_set) {
      expect(U"<");
      if (!error && !parse_name(true).empty()) expect(U">");
      fail("undefined named list", src_.pos);
      return r;
    }
    if (ch == U'N') {
      const std::size_t saved_pos = src_.pos;
      if (src_.match(U"{")) {
        src_.get_while([](char32_t c) { return (c | 0x20u) - U'a' < 26u || (c >= U'0' && c <= U'9') || c == U' ' || c == U'-'; },
                       true, true);
        if (src_.match(U"}")) { unsupported("a named character \\N{...}", saved_pos - 2); return r; }
      }
      src_.pos = saved_pos;
      return plain(U'N');
    }
    if (ch == U'p' || ch == U'P') return parse_property(ch == U'p', in_set, set);
    if (ch == U'R' && !in_set) {
      // Atomic(Branch([String("\r\n"), [\n\v\f\r\x85\u2028\u2029]]))
      node crlf;
      crlf.kind = node_kind::concat;
      crlf.kids = {make(node_kind::literal, U'\r'), make(node_kind::literal, U'\n')};
      const auto crlf_id = add(std::move(crlf));
      char_set s;
      s.add(U'\n', U'\r');
      s.add(0x85, 0x85);
      s.add(0x2028, 0x2029);
      const auto set_id = set_node(std::move(s));
      node alt;
      alt.kind = node_kind::alt;
      alt.kids = {crlf_id, set_id};
      r.node = make1(node_kind::atomic, add(std::move(alt)));
      return r;
    }
    if (ch == U'X' && !in_set) { unsupported("a grapheme cluster \\X", src_.pos - 2); return r; }
    const bool alpha = (ch | 0x20u) - U'a' < 26u;
    if (alpha) {
      if (!in_set) {
        switch (ch) {
          case U'A': r.node = assertion(op::at_begin); return r;
          case U'b': r.node = assertion(op::word_edge); return r;
          case U'B': r.node = assertion(op::not_word_edge); return r;
          case U'K': r.node = make(node_kind::empty); return r;  // \K moves the match start: no effect on match()
          case U'm': r.node = assertion(op::word_start); return r;
          case U'M': r.node = assertion(op::word_end); return r;
          case U'Z':
          case U'z': r.node = assertion(op::at_end); return r;
          default: break;
        }
      }
      std::uint32_t key = 0;
      bool positive = true;
      switch (ch) {
        case U'd': key = unicode::decimal_number_key; break;
        case U'D': key = unicode::decimal_number_key; positive = false; break;
        case U'h': key = unicode::blank_key; break;
        case U's': key = unicode::whitespace_key; break;
        case U'S': key = unicode::whitespace_key; positive = false; break;
        case U'w': key = unicode::word_key; break;
        case U'W': key = unicode::word_key; positive = false; break;
        default: break;
      }
      if (key) {
        if (in_set) set->classes.push_back(item(key, positive));
        else r.node = property_node(key, positive);
        return r;
      }
      switch (ch) {
        case U'a': return plain(7);
        case U'b': return plain(8);
        case U'f': return plain(12);
        case U'n': return plain(10);
        case U'r': return plain(13);
        case U't': return plain(9);
        case U'v': return plain(11);
        default: break;
      }
      std::string m = "bad escape \\";
      text::append_utf8(m, ch);
      fail(m, src_.pos);
      return r;
    }
    if (ch >= U'0' && ch <= U'9') return parse_numeric_escape(ch, in_set);
    return plain(ch);
  }

  constexpr std::optional<std::uint32_t> parse_group_ref() {
    if (!src_.match(U"<")) return std::nullopt;
    const std::size_t saved_pos = src_.pos;
    // Errors here make \g a literal: parse on a copy of the error state.
    auto name = src_.get_while([](char32_t c) { return c == U')' || c == U'>'; }, false);
    if (name.empty()) return std::nullopt;
    if (all_digits(name)) {
      bool zero = true;
      for (char32_t c : name) zero = zero && c == U'0';
      if (zero) return std::nullopt;
    } else if (!is_identifier(name)) {
      return std::nullopt;
    }
    if (!src_.match(U">")) return std::nullopt;
    if (is_open_group(name)) return std::nullopt;
    return ref_group(name, saved_pos, ignorecase());
  }

  constexpr escape_result parse_numeric_escape(char32_t ch, bool in_set) {
    escape_result r;
    auto octal = [](char32_t c) { return c >= U'0' && c <= U'7'; };
    if (in_set || ch == U'0') {
      std::u32string digits(1, ch);
      std::size_t saved_pos = src_.pos;
      char32_t c = src_.get();
      while (digits.size() < 3 && c != end_of_pattern && octal(c)) {
        digits += c;
        saved_pos = src_.pos;
        c = src_.get();
      }
      src_.pos = saved_pos;
      if (!octal(digits[0])) {
        std::string m = "bad escape \\";
        text::append_utf8(m, digits[0]);
        fail(m, src_.pos);
        return r;
      }
      std::uint32_t v = 0;
      for (char32_t d : digits) v = v * 8 + (d - U'0');
      r.character = static_cast<char32_t>(v);
      if (!in_set) r.node = character(static_cast<char32_t>(v));
      return r;
    }
    std::u32string digits(1, ch);
    std::size_t saved_pos = src_.pos;
    char32_t c = src_.get();
    if (c != end_of_pattern && c >= U'0' && c <= U'9') {
      digits += c;
      saved_pos = src_.pos;
      c = src_.get();
      if (octal(digits[0]) && octal(digits[1]) && c != end_of_pattern && octal(c)) {
        const std::uint32_t mask = (flags_ & (flag::ascii | flag::locale)) ? 0xFF : 0x1FF;
        const std::uint32_t v = ((digits[0] - U'0') * 64 + (digits[1] - U'0') * 8 + (c - U'0')) & mask;
        r.character = static_cast<char32_t>(v);
        r.node = character(static_cast<char32_t>(v));
        return r;
      }
    }
    src_.pos = saved_pos;
    if (is_open_group(digits)) { fail("cannot refer to an open group", src_.pos); return r; }
    r.node = ref_group(digits, src_.pos, ignorecase());
    return r;
  }

  // parse_property_name: (property, value); property empty when unqualified.
  constexpr std::pair<std::u32string, std::u32string> parse_property_name() {
    auto name_part = [](char32_t c) {
      return (c | 0x20u) - U'a' < 26u || (c >= U'0' && c <= U'9') || c == U' ' || c == U'&' || c == U'_' ||
             c == U'-' || c == U'.';
    };
    auto name = src_.get_while(name_part);
    std::size_t saved_pos = src_.pos;
    const char32_t ch = src_.get();
    std::u32string prop;
    if (ch == U':' || ch == U'=') {
      auto value = src_.get_while([&](char32_t c) { return name_part(c) || c == U'/'; });
      std::size_t a = 0, b = value.size();
      while (a < b && py_isspace(value[a])) ++a;
      while (b > a && py_isspace(value[b - 1])) --b;
      value = value.substr(a, b - a);
      if (!value.empty()) {
        saved_pos = src_.pos;
        prop = name;
        name = value;
      }
    }
    src_.pos = saved_pos;
    return {prop, name};
  }

  constexpr bool add_property(const std::u32string& prop, const std::u32string& value, bool positive, bool posix,
                              std::size_t at, bool in_set, char_set* set, escape_result& r) {
    const auto found = unicode::lookup_property(prop, value, positive, posix);
    using st = unicode::resolved_property::status;
    if (found.state == st::unknown_property) { fail("unknown property", src_.pos); return false; }
    if (found.state == st::unknown_value) { fail("unknown property value", src_.pos); return false; }
    if (found.state != st::ok) {
      std::string shown = narrow(prop.empty() ? value : prop + U"=" + value);
      unsupported("the Unicode property " + text::py_repr(shown), at);
      return false;
    }
    if (in_set) set->classes.push_back(item(found.key, found.positive, posix));
    else r.node = property_node(found.key, found.positive);
    return true;
  }

  constexpr escape_result parse_property(bool positive, bool in_set, char_set* set) {
    escape_result r;
    const std::size_t saved_pos = src_.pos;
    const std::size_t at = saved_pos - 2;
    const char32_t ch = src_.get();
    if (ch == U'{') {
      const bool negate = src_.match(U"^");
      const auto [prop, name] = parse_property_name();
      if (src_.match(U"}")) {
        add_property(prop, name, positive != negate, false, at, in_set, set, r);
        return r;
      }
    } else if (ch == U'C' || ch == U'L' || ch == U'M' || ch == U'N' || ch == U'P' || ch == U'S' || ch == U'Z') {
      add_property(U"", std::u32string(1, ch), positive, false, at, in_set, set, r);
      return r;
    }
    src_.pos = saved_pos;
    r.character = positive ? U'p' : U'P';
    if (!in_set) r.node = character(*r.character);
    return r;
  }

  // ---- sets ----
  constexpr std::uint32_t parse_set() {
    const bool saved_ignore = src_.ignore_space;
    src_.ignore_space = false;
    char_set s = new_set();
    s.negated = src_.match(U"^");
    bool first = true;
    while (!error) {
      const std::size_t saved_pos = src_.pos;
      if (!first && src_.match(U"]")) { src_.pos = saved_pos; break; }
      first = false;
      parse_set_member(s);
    }
    if (!error && !src_.match(U"]")) fail("missing ]", src_.pos);
    src_.ignore_space = saved_ignore;
    if (error) return 0;
    // SetUnion.optimise: a set holding a property and its complement becomes "any character", its own
    // negation dropped ([^\w\W] matches everything there).
    for (const auto& a : s.classes)
      for (const auto& b : s.classes)
        if (a.key == b.key && a.positive && !b.positive) {
          node n;
          n.kind = node_kind::any;
          n.dotall = true;
          return add(std::move(n));
        }
    return set_node(std::move(s));
  }

  // One set item: a character (returned) or a property merged into `s` (nullopt).
  constexpr std::optional<char32_t> parse_set_item(char_set& s) {
    if (src_.match(U"\\")) return parse_escape(true, &s).character;
    const std::size_t saved_pos = src_.pos;
    if (src_.match(U"[:")) {
      const bool negate = src_.match(U"^");
      const auto [prop, name] = parse_property_name();
      if (src_.match(U":]")) {
        escape_result r;
        add_property(prop, name, !negate, true, saved_pos, true, &s, r);
        return std::nullopt;
      }
      src_.pos = saved_pos;
    }
    const char32_t ch = src_.get();
    if (ch == end_of_pattern) { fail("unterminated character set", src_.pos); return std::nullopt; }
    return ch;
  }

  constexpr void parse_set_member(char_set& s) {
    const auto start = parse_set_item(s);
    if (error || !start) return;
    if (!src_.match(U"-")) { s.add(*start, *start); return; }
    const std::size_t saved_pos_2 = src_.pos;
    if (src_.match(U"]")) {  // "a-]": the character and '-'
      src_.pos = saved_pos_2;
      s.add(*start, *start);
      s.add(U'-', U'-');
      return;
    }
    const auto end = parse_set_item(s);
    if (error) return;
    if (!end) {  // "a-\d": the character, '-' and the class
      s.add(*start, *start);
      s.add(U'-', U'-');
      return;
    }
    if (*start > *end) { fail("bad character range", src_.pos); return; }
    s.add(*start, *end);
  }
};

}  // namespace detail
}  // namespace qpolicy::match
