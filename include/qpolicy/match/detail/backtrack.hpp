#pragma once
// The engine for patterns an NFA cannot run (backreferences, lookaround, atomic groups, possessive
// quantifiers, conditionals): a constexpr backtracking VM in the order the `regex` package tries
// alternatives, with a step budget. Patterns whose future depends only on (instruction, position) --
// no backreferences or group conditions -- also remember the states that failed, which makes them
// linear in practice; the budget then only stops the others.
//
// Lookbehinds run backwards, as the package runs them: their body is compiled in reverse (a sequence's
// items last to first, each consuming the character before the position), so atomic groups, captures
// and references inside them decide exactly as there.
#include <cstdint>

#include "qpolicy/core/detail/buffer.hpp"
#include "qpolicy/core/detail/lean_vector.hpp"
#include "qpolicy/match/detail/nfa.hpp"
#include "qpolicy/match/detail/regex_ast.hpp"

namespace qpolicy::match {

/// Steps one backtracking pattern may take on one name, at run time and in compile-time plans alike.
/// Past it the layer is an error naming the pattern and the name (never a silent answer).
inline constexpr std::uint64_t backtrack_step_budget = 100000;

enum class bop : std::uint8_t {
  set, literal, literal_fold, any, any_but_nl, assertion,
  split,       // try a, then b
  jmp,         // a
  save,        // capture slot a = position
  backref,     // the text of group a (flag fold)
  look,        // body at a, continue at b (flags behind / negative)
  atomic,      // body at a, continue at b
  cond_group,  // group a matched ? next : b
  cond_look,   // look body at a: holds ? c : b
  succeed,     // end of a look / atomic body
  match,
  mark,        // register a = position (loop entry)
  check,       // register a == position (an empty iteration): leave the loop for b, keeping its captures
};

namespace bflag {
inline constexpr std::uint8_t ascii = 1, fold = 2, behind = 4, negative = 8, reverse = 16;
}

struct binst {
  bop code = bop::match;
  op assertion = op::at_begin;
  std::uint8_t flags = 0;
  std::uint32_t a = 0, b = 0, c = 0;
  std::uint32_t slot = 0;  // split: its row of the visited table; look, atomic, cond_look: of the results
};

/// A compiled backtracking pattern.
struct backtrack_program {
  lean_vector<binst> insts;
  lean_vector<char_set> sets;
  std::uint32_t groups = 0;
  std::uint32_t registers = 0;
  bool memo = false;  // no backreferences or group conditions: failed (pc, position) pairs stay failed
  std::uint32_t splits = 0, looks = 0;  // rows of the memo tables
};

namespace detail {

class backtrack_compiler {
 public:
  constexpr backtrack_compiler(backtrack_program& p, const lean_vector<node>& nodes, bool ascii)
      : p_(p), nodes_(nodes), ascii_(ascii) {}

  bool too_large = false;

  // `rev`: inside a lookbehind, matching backwards from the position.
  constexpr void emit(std::uint32_t id, bool rev = false) {
    if (too_large) return;
    if (p_.insts.size() > max_program_size) { too_large = true; return; }
    const node& n = nodes_[id];
    const std::uint8_t dir = rev ? bflag::reverse : std::uint8_t{0};
    switch (n.kind) {
      case node_kind::empty: return;
      case node_kind::set: push({bop::set, op::at_begin, dir, n.value, 0, 0}); return;
      case node_kind::literal:
        push({n.fold ? bop::literal_fold : bop::literal, op::at_begin,
              static_cast<std::uint8_t>(dir | (ascii_ ? bflag::ascii : 0)), n.value, 0, 0});
        return;
      case node_kind::any: push({n.dotall ? bop::any : bop::any_but_nl, op::at_begin, dir, 0, 0, 0}); return;
      case node_kind::assertion: {
        const bool ascii = n.enc == encoding::ascii || (n.enc == encoding::deferred && ascii_);
        push({bop::assertion, n.assertion, ascii ? bflag::ascii : std::uint8_t{0}, 0, 0, 0});
        return;
      }
      case node_kind::concat:
        if (rev)
          for (std::size_t k = n.kids.size(); k > 0; --k) emit(n.kids[k - 1], rev);
        else
          for (auto k : n.kids) emit(k, rev);
        return;
      case node_kind::alt: {
        lean_vector<std::size_t> exits;
        for (std::size_t k = 0; k < n.kids.size(); ++k) {
          if (k + 1 < n.kids.size()) {
            const auto split = push({bop::split});
            p_.insts[split].a = here();
            emit(n.kids[k], rev);
            exits.push_back(push({bop::jmp}));
            p_.insts[split].b = here();
          } else {
            emit(n.kids[k], rev);
          }
          if (too_large) return;
        }
        for (auto e : exits) p_.insts[e].a = here();
        return;
      }
      case node_kind::group:  // backwards, the end is seen first
        push({bop::save, op::at_begin, 0, 2 * n.value + (rev ? 1 : 0), 0, 0});
        emit(n.kids[0], rev);
        push({bop::save, op::at_begin, 0, 2 * n.value + (rev ? 0 : 1), 0, 0});
        return;
      case node_kind::backref: {
        std::uint8_t f = static_cast<std::uint8_t>(dir | (n.fold ? bflag::fold : 0));
        if (ascii_) f |= bflag::ascii;
        push({bop::backref, op::at_begin, f, n.value, 0, 0});
        return;
      }
      case node_kind::look: {
        const auto at = push({bop::look, op::at_begin, look_flags(n), 0, 0, 0});
        p_.insts[at].a = here();
        emit(n.kids[0], n.behind);
        push({bop::succeed});
        p_.insts[at].b = here();
        return;
      }
      case node_kind::atomic: {
        const auto at = push({bop::atomic});
        p_.insts[at].a = here();
        emit(n.kids[0], rev);
        push({bop::succeed});
        p_.insts[at].b = here();
        return;
      }
      case node_kind::cond: {
        std::size_t at = 0;
        if (n.kids.size() == 3) {
          const node& look = nodes_[n.kids[2]];
          at = push({bop::cond_look, op::at_begin, look_flags(look), 0, 0, 0});
          p_.insts[at].a = here();
          emit(look.kids[0], look.behind);
          push({bop::succeed});
          p_.insts[at].c = here();
        } else {
          at = push({bop::cond_group, op::at_begin, 0, n.value, 0, 0});
        }
        emit(n.kids[0], rev);
        const auto exit = push({bop::jmp});
        p_.insts[at].b = here();
        emit(n.kids[1], rev);
        p_.insts[exit].a = here();
        return;
      }
      case node_kind::repeat: {
        for (std::uint32_t k = 0; k < n.min && !too_large; ++k) emit(n.kids[0], rev);
        if (n.max == unbounded) {
          const auto loop = push({bop::split});
          std::uint32_t reg = 0;
          if (!p_.memo) {
            reg = p_.registers++;
            push({bop::mark, op::at_begin, 0, reg, 0, 0});
          }
          const auto body = loop + 1;
          emit(n.kids[0], rev);
          const auto check = p_.memo ? 0 : push({bop::check, op::at_begin, 0, reg, 0, 0});
          push({bop::jmp, op::at_begin, 0, static_cast<std::uint32_t>(loop), 0, 0});
          set_split(loop, static_cast<std::uint32_t>(body), here(), n.lazy);
          if (!p_.memo) p_.insts[check].b = here();
        } else {
          lean_vector<std::size_t> splits;
          for (std::uint32_t k = n.min; k < n.max && !too_large; ++k) {
            splits.push_back(push({bop::split}));
            emit(n.kids[0], rev);
          }
          for (auto s : splits) set_split(s, static_cast<std::uint32_t>(s + 1), here(), n.lazy);
        }
        return;
      }
    }
  }

  /// Ends the program and numbers the memo rows: a state is remembered where the run branches (every
  /// other instruction leads to one next state), which keeps the tables a few rows per name.
  constexpr void finish() {
    push({bop::match});
    for (auto& in : p_.insts) {
      if (in.code == bop::split) in.slot = p_.splits++;
      else if (in.code == bop::look || in.code == bop::atomic || in.code == bop::cond_look) in.slot = p_.looks++;
    }
  }

  constexpr std::size_t push(binst i) {
    p_.insts.push_back(i);
    return p_.insts.size() - 1;
  }
  constexpr std::uint32_t here() const { return static_cast<std::uint32_t>(p_.insts.size()); }

 private:
  backtrack_program& p_;
  const lean_vector<node>& nodes_;
  bool ascii_;

  static constexpr std::uint8_t look_flags(const node& n) {
    return static_cast<std::uint8_t>((n.behind ? bflag::behind : 0) | (n.negative ? bflag::negative : 0));
  }
  constexpr void set_split(std::size_t at, std::uint32_t body, std::uint32_t exit, bool lazy) {
    p_.insts[at].a = lazy ? exit : body;
    p_.insts[at].b = lazy ? body : exit;
  }
};

/// Runs one backtracking program over one name (start-anchored, as regex.match).
// Written for constant evaluation as much as for run time, where each vector call is a constexpr call
// and GCC fills a vector element by element: zero-filled buffers (positions stored plus one, 0 for
// unset), one frame stack for every run of a name (a look or atomic body runs above its caller's
// frames, under a fresh stamp of the visited table, so nothing is cleared), raw pointers in the loop.
class backtracker {
 public:
  constexpr backtracker(const backtrack_program& p, const lean_vector<char32_t>& text)
      : p_(p), t_(text.data()), n_(static_cast<std::int64_t>(text.size())), caps_(2 * (p.groups + 1)),
        regs_(p.registers), frames_(16) {}

  bool over_budget = false;

  constexpr bool matches() { return run(0, 0) >= 0 && !over_budget; }

 private:
  // A frame is two words: its kind and pc (kind << 32 | pc), and its value (branch: the position;
  // capture / register: the old value). Scalars, so that the stack is cheap to make.
  enum frame_kind : std::int64_t { branch, capture, reg };

  const backtrack_program& p_;
  const char32_t* t_;
  std::int64_t n_;
  buffer<std::int64_t> caps_;  // slot 2g: start of group g plus one, 2g + 1: its end plus one
  buffer<std::int64_t> regs_;  // loop entry positions plus one
  buffer<std::int64_t> frames_;
  std::size_t depth_ = 0;  // frames on the stack
  std::uint64_t steps_ = 0;
  // memo mode, from step `memo_from` on (a typical name is decided in fewer steps, and the tables cost
  // more to make than those steps): the (split, position) pairs visited by the run stamped `stamp_`
  // (they failed, or lie on the path being tried), and the result of a look / atomic instruction at a
  // position plus 2 (0 unknown, 1 failed, else the end position + 2), shared by every run.
  static constexpr std::uint64_t memo_from = 256;
  buffer<std::uint32_t> stamps_;
  std::uint32_t stamp_ = 0;
  buffer<std::int32_t> results_;

  constexpr void push(frame_kind kind, std::uint32_t pc, std::int64_t value) {
    if (2 * depth_ == frames_.size()) {
      buffer<std::int64_t> bigger(2 * frames_.size());
      for (std::size_t k = 0; k < frames_.size(); ++k) bigger[k] = frames_[k];
      frames_ = std::move(bigger);
    }
    frames_[2 * depth_] = kind << 32 | pc;
    frames_[2 * depth_ + 1] = value;
    ++depth_;
  }

  constexpr bool backref_at(const binst& in, std::int64_t& pos) const {
    const auto s = caps_[2 * in.a] - 1, e = caps_[2 * in.a + 1] - 1;
    if (s < 0 || e < 0) return false;
    const auto len = e > s ? e - s : 0;
    const bool rev = (in.flags & bflag::reverse) != 0;
    const auto from = rev ? pos - len : pos;  // backwards: the text that ends here
    if (from < 0 || from + len > n_) return false;
    for (std::int64_t k = 0; k < len; ++k) {
      const char32_t want = t_[s + k], got = t_[from + k];
      if (want == got) continue;
      if (!(in.flags & bflag::fold) || !folded_equal(want, got, (in.flags & bflag::ascii) != 0)) return false;
    }
    pos = rev ? from : pos + len;
    return true;
  }

  // A look or atomic instruction at (pc, pos): its end (the position itself for a look), or -1.
  // Captures made inside a positive look or an atomic group stay (undone on backtracking).
  constexpr std::int64_t evaluate(std::uint32_t pc, std::int64_t pos) {
    const binst& in = p_.insts[pc];
    const std::size_t key = in.slot * static_cast<std::size_t>(n_ + 1) + static_cast<std::size_t>(pos);
    const bool memo = results_.size() != 0;
    if (memo && results_[key] != 0) return results_[key] - 2;
    const bool negative = in.code != bop::atomic && (in.flags & bflag::negative);
    buffer<std::int64_t> before;
    if (!p_.memo) before = caps_;
    auto end = run(in.a, pos);
    if (over_budget) return -1;
    if (negative) {
      if (!p_.memo) caps_ = std::move(before);
      end = end >= 0 ? -1 : pos;
    } else if (end >= 0 && !p_.memo) {
      for (std::uint32_t s = 0; s < caps_.size(); ++s)
        if (caps_[s] != before[s]) push(capture, s, before[s]);
    }
    if (in.code != bop::atomic && end >= 0) end = pos;
    if (memo) results_[key] = static_cast<std::int32_t>(end + 2);
    return end;
  }

  // Runs from (pc, pos) to a match / succeed instruction: its position, or -1. The frames it pushes
  // are gone when it returns; the captures it made stay (its caller keeps or restores them).
  constexpr std::int64_t run(std::uint32_t pc, std::int64_t pos) {
    const std::size_t base = depth_;
    const std::uint32_t stamp = ++stamp_;
    const binst* insts = p_.insts.data();
    const std::size_t width = static_cast<std::size_t>(n_ + 1);
    while (true) {
      if (++steps_ > backtrack_step_budget) {
        over_budget = true;
        depth_ = base;
        return -1;
      }
      if (steps_ == memo_from && p_.memo) {
        stamps_ = buffer<std::uint32_t>(p_.splits * width);
        results_ = buffer<std::int32_t>(p_.looks * width);
      }
      const binst& in = insts[pc];
      bool ok = true;
      if (in.code == bop::split && stamps_.size() != 0) {
        std::uint32_t& seen = stamps_[in.slot * width + static_cast<std::size_t>(pos)];
        if (seen == stamp) ok = false;
        else seen = stamp;
      }
      if (ok) {
        const bool rev = (in.flags & bflag::reverse) != 0;
        // The character consumed: the one after the position, or before it inside a lookbehind.
        const bool more = rev ? pos > 0 : pos < n_;
        const char32_t c = more ? t_[rev ? pos - 1 : pos] : 0;
        switch (in.code) {
          case bop::set:
          case bop::literal:
          case bop::literal_fold:
          case bop::any:
          case bop::any_but_nl:
            if (in.code == bop::set) ok = more && set_contains(p_.sets[in.a], c) == tri::yes;
            else if (in.code == bop::literal) ok = more && c == in.a;
            else if (in.code == bop::literal_fold) ok = more && folded_equal(in.a, c, (in.flags & bflag::ascii) != 0);
            else ok = more && (in.code == bop::any || c != U'\n');
            if (ok) {
              pos += rev ? -1 : 1;
              ++pc;
            }
            break;
          case bop::assertion:
            ok = assertion_holds(in.assertion, context_at(t_, static_cast<std::size_t>(n_), static_cast<std::size_t>(pos)),
                                 (in.flags & bflag::ascii) != 0) == tri::yes;
            ++pc;
            break;
          case bop::split:
            push(branch, in.b, pos);
            pc = in.a;
            break;
          case bop::jmp: pc = in.a; break;
          case bop::save:
            push(capture, in.a, caps_[in.a]);
            caps_[in.a] = pos + 1;
            ++pc;
            break;
          case bop::backref:
            ok = backref_at(in, pos);
            ++pc;
            break;
          case bop::look:
          case bop::atomic:
          case bop::cond_look: {
            const auto end = evaluate(pc, pos);
            if (over_budget) {
              depth_ = base;
              return -1;
            }
            if (in.code == bop::cond_look) {
              pc = end >= 0 ? in.c : in.b;
            } else {
              ok = end >= 0;
              pos = ok ? end : pos;
              pc = in.b;
            }
            break;
          }
          case bop::cond_group: pc = (caps_[2 * in.a] > 0 && caps_[2 * in.a + 1] > 0) ? pc + 1 : in.b; break;
          case bop::succeed:
          case bop::match: depth_ = base; return pos;
          case bop::mark:
            push(reg, in.a, regs_[in.a]);
            regs_[in.a] = pos + 1;
            ++pc;
            break;
          case bop::check: pc = regs_[in.a] == pos + 1 ? in.b : pc + 1; break;
        }
      }
      if (ok) continue;
      while (true) {  // backtrack: undo captures and registers down to the last open branch
        if (depth_ == base) return -1;
        --depth_;
        const std::int64_t kind = frames_[2 * depth_] >> 32, value = frames_[2 * depth_ + 1];
        const auto at = static_cast<std::uint32_t>(frames_[2 * depth_]);
        if (kind == capture) caps_[at] = value;
        else if (kind == reg) regs_[at] = value;
        else {
          pc = at;
          pos = value;
          break;
        }
      }
    }
  }
};

}  // namespace detail

/// Whether `p` matches at the start of `text`; `over_budget` when it could not tell within the budget.
struct backtrack_answer {
  bool matched = false;
  bool over_budget = false;
};

/// Whether the program answers alike (the same match, the same steps) for names that differ only in
/// which ASCII digits they hold: no backreference (it compares text), no digit literal, no set that
/// holds some digits but not others; \w, \d, \b and the anchors treat every digit alike. The
/// compile-time planner then decides one layer per index length instead of one per index.
constexpr bool digit_blind(const backtrack_program& p) {
  for (const auto& in : p.insts) {
    if (in.code == bop::backref) return false;
    if ((in.code == bop::literal || in.code == bop::literal_fold) && in.a >= U'0' && in.a <= U'9') return false;
    if (in.code == bop::set)
      for (char32_t c = U'1'; c <= U'9'; ++c)
        if (p.sets[in.a].ascii_member(c) != p.sets[in.a].ascii_member(U'0')) return false;
  }
  return true;
}

constexpr backtrack_answer run_backtrack(const backtrack_program& p, const lean_vector<char32_t>& text) {
  detail::backtracker bt(p, text);
  const bool m = bt.matches();
  return {m, bt.over_budget};
}

}  // namespace qpolicy::match
