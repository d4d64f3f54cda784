#pragma once
// The reference way to run a program: a Thompson NFA simulation over code points, constexpr, linear
// in the length of the name. It answers for every pattern of the program at once.
#include <cstdint>

#include "qpolicy/core/detail/buffer.hpp"
#include "qpolicy/core/detail/lean_vector.hpp"
#include "qpolicy/match/detail/program.hpp"

namespace qpolicy::match {

/// Where the simulation stands between two characters; decides the zero-width assertions.
struct position_context {
  bool at_begin = false;
  bool at_end = false;
  bool before_final_newline = false;
  char32_t prev = 0, next = 0;
  bool has_prev = false, has_next = false;
};

/// The context between text[i - 1] and text[i] of a text of n code points.
constexpr position_context context_at(const char32_t* text, std::size_t n, std::size_t i) {
  position_context ctx;
  ctx.at_begin = i == 0;
  ctx.at_end = i == n;
  ctx.before_final_newline = i + 1 == n && text[i] == U'\n';
  ctx.has_prev = i > 0;
  ctx.prev = i > 0 ? text[i - 1] : 0;
  ctx.has_next = i < n;
  ctx.next = i < n ? text[i] : 0;
  return ctx;
}

/// Whether a zero-width assertion holds (`ascii`: the instruction's ASCII flag for word tests).
constexpr tri assertion_holds(op code, const position_context& ctx, bool ascii = false) {
  switch (code) {
    case op::at_begin: return ctx.at_begin ? tri::yes : tri::no;
    case op::at_dollar: return (ctx.at_end || ctx.before_final_newline) ? tri::yes : tri::no;
    case op::at_end: return ctx.at_end ? tri::yes : tri::no;
    case op::line_begin: return (ctx.at_begin || (ctx.has_prev && ctx.prev == U'\n')) ? tri::yes : tri::no;
    case op::line_end: return (ctx.at_end || (ctx.has_next && ctx.next == U'\n')) ? tri::yes : tri::no;
    case op::word_edge:
    case op::not_word_edge:
    case op::word_start:
    case op::word_end: {
      const bool a = ctx.has_prev && unicode::is_word(ctx.prev, ascii);
      const bool b = ctx.has_next && unicode::is_word(ctx.next, ascii);
      bool holds = a != b;
      if (code == op::not_word_edge) holds = !holds;
      if (code == op::word_start) holds = !a && b;
      if (code == op::word_end) holds = a && !b;
      return holds ? tri::yes : tri::no;
    }
    default: return tri::yes;
  }
}

/// Per-pattern answers of one run.
struct run_result {
  lean_vector<std::uint8_t> matched;  // bytes, not vector<bool>: far cheaper during constant evaluation
};

/// Follows the epsilon edges from `pcs` under `ctx`; appends consuming instructions to `out` and marks
/// reached `match` instructions. Patterns already matched are skipped (their answer is final).
class closure_builder {
 public:
  constexpr closure_builder() = default;
  // Each visit pushes at most two pcs per newly marked instruction, plus its start.
  constexpr explicit closure_builder(const program& prog)
      : mark_(prog.insts.size()), stack_(2 * prog.insts.size() + 1) {}

  // The program is an argument, not a member, so the matchers that own one stay movable.
  template <class Pcs>
  constexpr void run(const program& prog, const Pcs& pcs, const position_context& ctx, lean_vector<std::uint32_t>& out,
                     run_result& res) {
    ++gen_;
    for (std::size_t k = 0, n = pcs.size(); k < n; ++k)
      walk<false>(prog, pcs[k], &ctx, &out, res.matched.data(), nullptr, nullptr);
  }
  /// The closure of one pc when no assertion lies on it (then it is the same at every position): its
  /// consuming pcs and matched patterns as bits, or false, the bits partly written, at an assertion.
  constexpr bool run_plain(const program& prog, std::uint32_t pc, std::uint64_t* consuming, std::uint64_t* matched) {
    ++gen_;
    return walk<true>(prog, pc, nullptr, nullptr, nullptr, consuming, matched);
  }

 private:
  buffer<std::uint32_t> mark_;
  buffer<std::uint32_t> stack_;
  std::uint32_t gen_ = 0;

  static constexpr void set_bit(std::uint64_t* bits, std::uint32_t k) { bits[k >> 6] |= std::uint64_t{1} << (k & 63); }

  // Raw pointers over preallocated storage: the compile-time planner builds its DFA states here, and
  // during constant evaluation every container call costs dozens of steps. Plain: bits out, and stop
  // at the first assertion; otherwise pcs out, assertions decided in `ctx`, patterns already matched
  // skipped.
  template <bool Plain>
  constexpr bool walk(const program& prog, std::uint32_t start, const position_context* ctx,
                      lean_vector<std::uint32_t>* out, std::uint8_t* matched, std::uint64_t* consuming_bits,
                      std::uint64_t* matched_bits) {
    std::uint32_t* stack = stack_.data();
    std::uint32_t* mark = mark_.data();
    const inst* insts = prog.insts.data();
    const std::uint32_t* owner = prog.owner.data();
    const std::uint32_t gen = gen_;
    std::size_t top = 0;
    stack[top++] = start;
    while (top > 0) {
      const auto pc = stack[--top];
      if (mark[pc] == gen) continue;
      mark[pc] = gen;
      if constexpr (!Plain)
        if (matched[owner[pc]]) continue;
      const inst& in = insts[pc];
      switch (in.code) {
        case op::split:
          stack[top++] = in.b;
          stack[top++] = in.a;
          break;
        case op::jmp: stack[top++] = in.a; break;
        case op::match:
          if constexpr (Plain) set_bit(matched_bits, in.a);
          else matched[in.a] = 1;
          break;
        case op::set:
        case op::literal:
        case op::literal_fold:
        case op::any:
        case op::any_but_nl:
          if constexpr (Plain) set_bit(consuming_bits, pc);
          else out->push_back(pc);
          break;
        default:
          if constexpr (Plain) return false;
          else if (assertion_holds(in.code, *ctx, in.b != 0) == tri::yes) stack[top++] = pc + 1;
          break;
      }
    }
    return true;
  }
};

/// Whether consuming instruction `in` accepts `c`.
constexpr tri consumes(const program& prog, const inst& in, char32_t c) {
  if (in.code == op::literal) return c == in.a ? tri::yes : tri::no;
  if (in.code == op::literal_fold) return folded_equal(in.a, c, in.b != 0) ? tri::yes : tri::no;
  if (in.code == op::any) return tri::yes;
  if (in.code == op::any_but_nl) return c == U'\n' ? tri::no : tri::yes;
  return set_contains(prog.sets[in.a], c);
}

/// Runs every pattern of `prog` over `text`, each anchored at the start of the text.
constexpr run_result run_nfa(const program& prog, const lean_vector<char32_t>& text) {
  run_result res{lean_vector<std::uint8_t>(prog.starts.size(), 0)};
  closure_builder closure(prog);
  lean_vector<std::uint32_t> current, next;
  const std::size_t n = text.size();
  for (std::size_t i = 0;; ++i) {
    const position_context ctx = context_at(text.data(), n, i);
    next.clear();
    if (i == 0) closure.run(prog, prog.starts, ctx, next, res);
    else closure.run(prog, current, ctx, next, res);
    if (i == n || next.empty()) break;
    current.clear();
    for (auto pc : next) {
      if (res.matched[prog.owner[pc]]) continue;
      const tri t = consumes(prog, prog.insts[pc], text[i]);
      if (t == tri::yes) current.push_back(pc + 1);
    }
    if (current.empty()) break;
  }
  return res;
}

}  // namespace qpolicy::match
