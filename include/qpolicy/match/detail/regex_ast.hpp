#pragma once
// The parsed form of a regex (a small tree of nodes) and its Thompson construction into a program,
// counted repetitions expanded up to max_program_size. Patterns that need more than an NFA
// (backreferences, lookaround, atomic groups, conditionals) run on the backtracker (backtrack.hpp),
// compiled from the same tree.
#include <cstdint>

#include "qpolicy/core/detail/lean_vector.hpp"
#include "qpolicy/match/detail/program.hpp"

namespace qpolicy::match::detail {

enum class node_kind : std::uint8_t {
  empty,
  set,        // sets[value]
  literal,    // the code point value (fold: under IGNORECASE)
  any,        // '.' (dotall: matches '\n')
  assertion,  // a zero-width op (ascii: word tests over ASCII)
  concat,
  alt,
  repeat,     // kids[0] min..max times (lazy)
  group,      // capture group `value` around kids[0]
  backref,    // the text of group `value` (fold)
  look,       // lookahead / lookbehind (behind, negative) of kids[0]
  atomic,     // kids[0] without backtracking into it
  cond,       // value > 0: group `value` matched ? kids[0] : kids[1]; value == 0: kids[2] is a look node
};

/// Where an encoding-dependent item took its encoding: a scoped (?a) / (?u), or the pattern's own
/// flags once it is parsed (the package resolves "default" items with the final flags).
enum class encoding : std::uint8_t { deferred, ascii, unicode };

struct node {
  node_kind kind = node_kind::empty;
  op assertion = op::at_begin;
  std::uint32_t value = 0;
  std::uint32_t min = 0, max = 0;
  lean_vector<std::uint32_t> kids;
  bool fold = false, dotall = false, lazy = false, behind = false, negative = false;
  encoding enc = encoding::deferred;
};

inline constexpr std::uint32_t unbounded = 0xFFFFFFFFu;

/// Whether a tree needs the backtracker (anything beyond literals, classes, repeats and anchors).
constexpr bool needs_backtracking(const lean_vector<node>& nodes) {
  for (const auto& n : nodes)
    if (n.kind == node_kind::backref || n.kind == node_kind::look || n.kind == node_kind::atomic ||
        n.kind == node_kind::cond)
      return true;
  return false;
}

/// Whether node `id` can match the empty string.
constexpr bool can_be_empty(const lean_vector<node>& nodes, std::uint32_t id) {
  const node& n = nodes[id];
  switch (n.kind) {
    case node_kind::set:
    case node_kind::literal:
    case node_kind::any: return false;
    case node_kind::concat:
      for (auto k : n.kids)
        if (!can_be_empty(nodes, k)) return false;
      return true;
    case node_kind::alt:
      for (auto k : n.kids)
        if (can_be_empty(nodes, k)) return true;
      return n.kids.empty();
    case node_kind::repeat: return n.min == 0 || can_be_empty(nodes, n.kids[0]);
    case node_kind::group:
    case node_kind::atomic: return can_be_empty(nodes, n.kids[0]);
    case node_kind::cond: return can_be_empty(nodes, n.kids[0]) || can_be_empty(nodes, n.kids[1]);
    default: return true;  // empty, assertions, lookaround, backreferences
  }
}

/// RegexBase.is_empty: sequences and branches of empty items, and what wraps only those.
constexpr bool is_empty(const lean_vector<node>& nodes, std::uint32_t id) {
  const node& n = nodes[id];
  switch (n.kind) {
    case node_kind::empty: return true;
    case node_kind::concat:
    case node_kind::alt:
      for (auto k : n.kids)
        if (!is_empty(nodes, k)) return false;
      return true;
    case node_kind::atomic:
    case node_kind::repeat: return is_empty(nodes, n.kids[0]);
    case node_kind::look: return !n.negative && is_empty(nodes, n.kids[0]);
    case node_kind::cond:
      if (n.kids.size() == 3) return is_empty(nodes, n.kids[2]) && is_empty(nodes, n.kids[0]);
      return is_empty(nodes, n.kids[0]) && is_empty(nodes, n.kids[1]);
    default: return false;
  }
}

/// The longest run of case-sensitive literals that every match consumes one after another: along the
/// root's sequence, through groups and atomic groups (each consumed exactly once), a run broken by
/// anything else. A name that does not contain it cannot match, so the backtracker need not run.
constexpr lean_vector<char32_t> required_literal(const lean_vector<node>& nodes, std::uint32_t root) {
  lean_vector<char32_t> run, best;
  lean_vector<std::uint32_t> todo{root};  // the sequence still to walk, last item on top
  while (!todo.empty()) {
    const node& n = nodes[todo.back()];
    todo.pop_back();
    if (n.kind == node_kind::literal && !n.fold) {
      run.push_back(static_cast<char32_t>(n.value));
      continue;
    }
    if (n.kind == node_kind::concat) {
      for (std::size_t k = n.kids.size(); k > 0; --k) todo.push_back(n.kids[k - 1]);
      continue;
    }
    if (n.kind == node_kind::group || n.kind == node_kind::atomic) {
      todo.push_back(n.kids[0]);
      continue;
    }
    if (run.size() > best.size()) best = run;  // anything else may consume other text: the run ends
    run.clear();
  }
  if (run.size() > best.size()) best = run;
  return best;
}

// Thompson construction with counted repetitions expanded (regular trees only).
class emitter {
 public:
  constexpr emitter(program& prog, const lean_vector<node>& nodes, std::uint32_t set_base, std::uint32_t owner,
                    bool ascii)
      : prog_(prog), nodes_(nodes), set_base_(set_base), owner_(owner), ascii_(ascii) {}

  bool too_large = false;

  constexpr void emit(std::uint32_t id) {
    if (too_large) return;
    if (prog_.insts.size() > max_program_size) { too_large = true; return; }
    const node& n = nodes_[id];
    switch (n.kind) {
      case node_kind::empty: return;
      case node_kind::set: push({op::set, set_base_ + n.value, 0}); return;
      case node_kind::literal:
        if (n.fold) push({op::literal_fold, n.value, ascii_ ? 1u : 0u});
        else push({op::literal, n.value, 0});
        return;
      case node_kind::any: push({n.dotall ? op::any : op::any_but_nl, 0, 0}); return;
      case node_kind::assertion: {
        const bool ascii = n.enc == encoding::ascii || (n.enc == encoding::deferred && ascii_);
        push({n.assertion, 0, ascii ? 1u : 0u});
        if (n.assertion == op::word_edge || n.assertion == op::not_word_edge || n.assertion == op::word_start ||
            n.assertion == op::word_end)
          prog_.uses_word_edges = true;
        return;
      }
      case node_kind::group: emit(n.kids[0]); return;
      case node_kind::concat:
        for (auto k : n.kids) emit(k);
        return;
      case node_kind::alt: {
        lean_vector<std::size_t> exits;
        for (std::size_t k = 0; k < n.kids.size(); ++k) {
          if (k + 1 < n.kids.size()) {
            const auto split = push({op::split, 0, 0});
            prog_.insts[split].a = static_cast<std::uint32_t>(split + 1);
            emit(n.kids[k]);
            exits.push_back(push({op::jmp, 0, 0}));
            prog_.insts[split].b = here();
          } else {
            emit(n.kids[k]);
          }
          if (too_large) return;
        }
        for (auto e : exits) prog_.insts[e].a = here();
        return;
      }
      case node_kind::repeat: {
        for (std::uint32_t k = 0; k < n.min && !too_large; ++k) emit(n.kids[0]);
        if (n.max == unbounded) {
          const auto split = push({op::split, 0, 0});
          prog_.insts[split].a = static_cast<std::uint32_t>(split + 1);
          emit(n.kids[0]);
          push({op::jmp, static_cast<std::uint32_t>(split), 0});
          prog_.insts[split].b = here();
        } else {
          lean_vector<std::size_t> splits;
          for (std::uint32_t k = n.min; k < n.max && !too_large; ++k) {
            const auto split = push({op::split, 0, 0});
            prog_.insts[split].a = static_cast<std::uint32_t>(split + 1);
            splits.push_back(split);
            emit(n.kids[0]);
          }
          for (auto s : splits) prog_.insts[s].b = here();
        }
        return;
      }
      default: too_large = true; return;  // backtracking nodes never reach here
    }
  }

  constexpr std::size_t push(inst i) {
    prog_.insts.push_back(i);
    prog_.owner.push_back(owner_);
    return prog_.insts.size() - 1;
  }
  constexpr std::uint32_t here() const { return static_cast<std::uint32_t>(prog_.insts.size()); }

 private:
  program& prog_;
  const lean_vector<node>& nodes_;
  std::uint32_t set_base_;
  std::uint32_t owner_;
  bool ascii_;  // the pattern's final encoding is ASCII (or LOCALE)
};

}  // namespace qpolicy::match::detail
