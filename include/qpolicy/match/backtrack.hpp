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
#include <vector>

#include "qpolicy/match/nfa.hpp"
#include "qpolicy/match/regex_ast.hpp"

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
};

/// A compiled backtracking pattern.
struct backtrack_program {
  std::vector<binst> insts;
  std::vector<char_set> sets;
  std::uint32_t groups = 0;
  std::uint32_t registers = 0;
  bool memo = false;  // no backreferences or group conditions: failed (pc, position) pairs stay failed
};

namespace detail {

class backtrack_compiler {
 public:
  constexpr backtrack_compiler(backtrack_program& p, const std::vector<node>& nodes, bool ascii)
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
        std::vector<std::size_t> exits;
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
          std::vector<std::size_t> splits;
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

  constexpr std::size_t push(binst i) {
    p_.insts.push_back(i);
    return p_.insts.size() - 1;
  }
  constexpr std::uint32_t here() const { return static_cast<std::uint32_t>(p_.insts.size()); }

 private:
  backtrack_program& p_;
  const std::vector<node>& nodes_;
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
class backtracker {
 public:
  constexpr backtracker(const backtrack_program& p, const std::vector<char32_t>& text)
      : p_(p), t_(text.data()), n_(text.size()), caps_(2 * (p.groups + 1), -1), regs_(p.registers, -1) {}

  bool over_budget = false;

  constexpr bool matches() {
    std::vector<std::uint64_t> visited;
    if (p_.memo) visited.assign((p_.insts.size() * (n_ + 1) + 63) / 64, 0);
    return run(0, 0, visited) >= 0 && !over_budget;
  }

 private:
  enum class frame_kind : std::uint8_t { branch, capture, reg };
  struct frame {
    frame_kind kind;
    std::uint32_t pc;
    std::int64_t value;  // branch: position; capture / reg: the old value
  };

  const backtrack_program& p_;
  const char32_t* t_;
  std::size_t n_;
  std::vector<std::int64_t> caps_;
  std::vector<std::int64_t> regs_;
  std::uint64_t steps_ = 0;
  // memo mode: the result of a look / atomic instruction at a position (-2 unknown, -1 failed, else
  // the end position), shared by every run.
  std::vector<std::int32_t> results_;

  constexpr bool backref_at(const binst& in, std::int64_t& pos) const {
    const auto s = caps_[2 * in.a], e = caps_[2 * in.a + 1];
    if (s < 0 || e < 0) return false;
    const auto len = e > s ? e - s : 0;
    const bool rev = (in.flags & bflag::reverse) != 0;
    const auto from = rev ? pos - len : pos;  // backwards: the text that ends here
    if (from < 0 || from + len > static_cast<std::int64_t>(n_)) return false;
    for (std::int64_t k = 0; k < len; ++k) {
      const char32_t want = t_[s + k], got = t_[from + k];
      if (want == got) continue;
      if (!(in.flags & bflag::fold) || !folded_equal(want, got, (in.flags & bflag::ascii) != 0)) return false;
    }
    pos = rev ? from : pos + len;
    return true;
  }

  // The end of a look / atomic body started at `pos` (a lookbehind's body runs backwards), or -1.
  constexpr std::int64_t sub_run(std::uint32_t body, std::int64_t pos) {
    std::vector<std::uint64_t> visited;
    if (p_.memo) visited.assign((p_.insts.size() * (n_ + 1) + 63) / 64, 0);
    return run(body, pos, visited);
  }

  // A look or atomic instruction at (pc, pos): its end (the position itself for a look), or -1.
  constexpr std::int64_t evaluate(std::uint32_t pc, std::int64_t pos, std::vector<frame>& stack) {
    const binst& in = p_.insts[pc];
    const std::size_t key = pc * (n_ + 1) + static_cast<std::size_t>(pos);
    if (p_.memo) {
      if (results_.empty()) results_.assign(p_.insts.size() * (n_ + 1), -2);
      if (results_[key] != -2) return results_[key];
    }
    const bool negative = in.code != bop::atomic && (in.flags & bflag::negative);
    const std::vector<std::int64_t> before = p_.memo ? std::vector<std::int64_t>{} : caps_;
    auto end = sub_run(in.a, pos);
    if (over_budget) return -1;
    if (negative) {
      if (!p_.memo) caps_ = before;
      end = end >= 0 ? -1 : pos;
    } else if (end >= 0 && !p_.memo) {
      for (std::uint32_t s = 0; s < caps_.size(); ++s)  // captures made inside stay, undone on backtracking
        if (caps_[s] != before[s]) stack.push_back({frame_kind::capture, s, before[s]});
    }
    if (in.code != bop::atomic && end >= 0) end = pos;
    if (p_.memo) results_[key] = static_cast<std::int32_t>(end);
    return end;
  }

  constexpr std::int64_t run(std::uint32_t pc, std::int64_t pos, std::vector<std::uint64_t>& visited) {
    std::vector<frame> stack;
    const binst* insts = p_.insts.data();
    const std::size_t width = n_ + 1;
    while (true) {
      bool ok = true;
      if (++steps_ > backtrack_step_budget) {
        over_budget = true;
        return -1;
      }
      if (p_.memo) {
        const std::size_t bit = pc * width + static_cast<std::size_t>(pos);
        if ((visited[bit >> 6] >> (bit & 63)) & 1) ok = false;
        else visited[bit >> 6] |= std::uint64_t{1} << (bit & 63);
      }
      if (ok) {
        const binst& in = insts[pc];
        const bool rev = (in.flags & bflag::reverse) != 0;
        // The character consumed: the one after the position, or before it inside a lookbehind.
        const bool more = rev ? pos > 0 : static_cast<std::size_t>(pos) < n_;
        const char32_t c = more ? t_[rev ? pos - 1 : pos] : 0;
        switch (in.code) {
          case bop::set: ok = more && set_contains(p_.sets[in.a], c) == tri::yes; break;
          case bop::literal: ok = more && c == in.a; break;
          case bop::literal_fold: ok = more && folded_equal(in.a, c, (in.flags & bflag::ascii) != 0); break;
          case bop::any: ok = more; break;
          case bop::any_but_nl: ok = more && c != U'\n'; break;
          default: break;
        }
        switch (in.code) {
          case bop::set:
          case bop::literal:
          case bop::literal_fold:
          case bop::any:
          case bop::any_but_nl:
            if (ok) {
              pos += rev ? -1 : 1;
              ++pc;
            }
            break;
          case bop::assertion:
            ok = assertion_holds(in.assertion, context_at(t_, n_, static_cast<std::size_t>(pos)), (in.flags & bflag::ascii) != 0) == tri::yes;
            ++pc;
            break;
          case bop::split:
            stack.push_back({frame_kind::branch, in.b, pos});
            pc = in.a;
            break;
          case bop::jmp: pc = in.a; break;
          case bop::save:
            stack.push_back({frame_kind::capture, in.a, caps_[in.a]});
            caps_[in.a] = pos;
            ++pc;
            break;
          case bop::backref:
            ok = backref_at(in, pos);
            ++pc;
            break;
          case bop::look:
          case bop::atomic: {
            const auto end = evaluate(pc, pos, stack);
            if (over_budget) return -1;
            ok = end >= 0;
            pos = ok ? end : pos;
            pc = in.b;
            break;
          }
          case bop::cond_group:
            pc = (caps_[2 * in.a] >= 0 && caps_[2 * in.a + 1] >= 0) ? pc + 1 : in.b;
            break;
          case bop::cond_look: {
            const auto end = evaluate(pc, pos, stack);
            if (over_budget) return -1;
            pc = end >= 0 ? in.c : in.b;
            break;
          }
          case bop::succeed:
          case bop::match: return pos;
          case bop::mark:
            stack.push_back({frame_kind::reg, in.a, regs_[in.a]});
            regs_[in.a] = pos;
            ++pc;
            break;
          case bop::check: pc = regs_[in.a] == pos ? in.b : pc + 1; break;
        }
      }
      if (ok) continue;
      while (true) {  // backtrack: undo captures and registers down to the last open branch
        if (stack.empty()) return -1;
        const frame f = stack.back();
        stack.pop_back();
        if (f.kind == frame_kind::capture) caps_[f.pc] = f.value;
        else if (f.kind == frame_kind::reg) regs_[f.pc] = f.value;
        else {
          pc = f.pc;
          pos = f.value;
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

constexpr backtrack_answer run_backtrack(const backtrack_program& p, const std::vector<char32_t>& text) {
  detail::backtracker bt(p, text);
  const bool m = bt.matches();
  return {m, bt.over_budget};
}

}  // namespace qpolicy::match
