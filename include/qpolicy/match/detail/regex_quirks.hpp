#pragma once
// The `regex` package's first-character prefilter (get_firstset / has_simple_start / _check_firstset)
// and repeat guards, as far as qpolicy needs them: checks over a parsed tree that find the patterns
// where the package's own matcher departs from the pattern's meaning. regex_parser refuses those
// (unsupported) instead of matching them differently from the package.
#include <cstdint>

#include "qpolicy/core/detail/lean_vector.hpp"
#include "qpolicy/match/detail/regex_ast.hpp"

namespace qpolicy::match::detail {

/// In a firstset: "the match may start with nothing here".
inline constexpr std::uint32_t no_first_item = 0xFFFFFFFFu;

/// has_simple_start: the pattern begins with a literal, a class or any character.
constexpr bool simple_start(const lean_vector<node>& nodes, std::uint32_t id) {
  const node& n = nodes[id];
  switch (n.kind) {
    case node_kind::literal:
    case node_kind::set:
    case node_kind::any: return true;
    case node_kind::concat: return !n.kids.empty() && simple_start(nodes, n.kids[0]);
    case node_kind::group:
    case node_kind::atomic: return simple_start(nodes, n.kids[0]);
    default: return false;
  }
}
/// get_firstset: adds the first items of `id` to `items` (`no_first_item` for "may start with
/// nothing"); false when the package has none (an item without one, such as '.' or a backreference).
constexpr bool firstset(const lean_vector<node>& nodes, std::uint32_t id, lean_vector<std::uint32_t>& items) {
  const node& n = nodes[id];
  switch (n.kind) {
    case node_kind::literal:
    case node_kind::set: items.push_back(id); return true;
    case node_kind::assertion:
    case node_kind::empty: items.push_back(no_first_item); return true;
    case node_kind::concat: {
      for (auto k : n.kids) {
        lean_vector<std::uint32_t> sub;
        if (!firstset(nodes, k, sub)) return false;
        bool open = false;
        for (auto x : sub) {
          if (x == no_first_item) open = true;
          else items.push_back(x);
        }
        if (!open) return true;
      }
      items.push_back(no_first_item);
      return true;
    }
    case node_kind::alt:
      for (auto k : n.kids)
        if (!firstset(nodes, k, items)) return false;
      if (n.kids.empty()) items.push_back(no_first_item);
      return true;
    case node_kind::repeat:
      if (!firstset(nodes, n.kids[0], items)) return false;
      if (n.min == 0) items.push_back(no_first_item);
      return true;
    case node_kind::group:
    case node_kind::atomic: return firstset(nodes, n.kids[0], items);
    case node_kind::look:
      if (!n.negative && !n.behind) return firstset(nodes, n.kids[0], items);
      items.push_back(no_first_item);
      return true;
    case node_kind::cond:
      if (n.kids.size() == 3) return false;
      return firstset(nodes, n.kids[0], items) && firstset(nodes, n.kids[1], items);
    default: return false;
  }
}
/// Whether the subtree holds a capturing group.
constexpr bool has_group(const lean_vector<node>& nodes, std::uint32_t id) {
  if (nodes[id].kind == node_kind::group) return true;
  for (auto k : nodes[id].kids)
    if (has_group(nodes, k)) return true;
  return false;
}
/// The package's repeat guards skip retrying a lazy repeat over a capturing body that can match empty
/// once a lookaround condition after it failed: with captures read back, matches are lost.
constexpr bool lazy_nullable_and_look_condition(const lean_vector<node>& nodes) {
  bool lazy = false, look_condition = false, captures_read = false;
  for (const auto& n : nodes) {
    lazy = lazy || (n.kind == node_kind::repeat && n.lazy && can_be_empty(nodes, n.kids[0]) &&
                    has_group(nodes, n.kids[0]));
    look_condition = look_condition || (n.kind == node_kind::cond && n.kids.size() == 3);
    captures_read = captures_read || n.kind == node_kind::backref || (n.kind == node_kind::cond && n.kids.size() == 2);
  }
  return lazy && look_condition && captures_read;
}
/// A negated case-insensitive class with a negative cased property (\P{Ll}, \p{^Lu}, ...) and other
/// members: the prefilter, which reads it without its own case flag, rejects the cased letters.
constexpr bool negative_cased_among_others(const char_set& cs) {
  using namespace unicode;
  bool cased = false;
  for (const auto& c : cs.classes)
    cased = cased || (!c.positive && (c.key == uppercase_letter_key || c.key == lowercase_letter_key ||
                                      c.key == titlecase_letter_key || c.key == uppercase_key || c.key == lowercase_key));
  const bool literals = cs.literals[0] != 0 || cs.literals[1] != 0 || !cs.wide.empty();
  return cased && (literals || cs.classes.size() > 1);
}
/// _check_firstset merges the case flags of the items that can start a match: a negated class among
/// them that is case-sensitive, or case-insensitive with a negative cased property and other members,
/// is then read differently from how the pattern matches it.
constexpr bool prefilter_folds_negated_class(const lean_vector<node>& nodes, const lean_vector<char_set>& sets,
                                             std::uint32_t root) {
  if (simple_start(nodes, root)) return false;
  lean_vector<std::uint32_t> items;
  if (!firstset(nodes, root, items) || items.empty()) return false;
  bool fold = false, negated_nocase = false, negated_cased = false;
  for (auto id : items) {
    if (id == no_first_item) return false;
    const node& n = nodes[id];
    if (n.kind == node_kind::literal) {
      fold = fold || n.fold;
      continue;
    }
    const char_set& cs = sets[n.value];
    fold = fold || cs.fold;
    bool negative = cs.negated;
    for (const auto& c : cs.classes) negative = negative || !c.positive;
    negated_nocase = negated_nocase || (!cs.fold && negative);
    negated_cased = negated_cased || (cs.fold && cs.negated && negative_cased_among_others(cs));
  }
  return fold && (negated_nocase || negated_cased);
}

}  // namespace qpolicy::match::detail
