#pragma once
// A constexpr lazy DFA over ASCII names, built from the same program and the same epsilon closure as
// the NFA simulation (nfa.hpp): each state is the set of NFA threads waiting before a character plus
// the patterns already decided. Constant evaluation is slow (about a microsecond per step under GCC
// 12), so the compile-time planner walks names on this table, one lookup per character, and may
// resume from any state it kept. Names with non-ASCII characters or '\n' run on the NFA.
#include <cstdint>
#include <string_view>
#include <vector>

#include "qpolicy/match/pattern.hpp"

namespace qpolicy::match {

/// Every pattern of a compiled list, answered by one walk over a lazily built DFA. Usable during
/// constant evaluation and at run time; not thread-safe.
class dfa_pattern_set {
 public:
  static constexpr std::int32_t start_state = 0;

  constexpr dfa_pattern_set() = default;
  constexpr explicit dfa_pattern_set(compiled_patterns compiled)
      : compiled_(std::move(compiled)), words_((compiled_.size() + 63) / 64), closure_(compiled_.prog) {
    scratch_.matched.assign(compiled_.size(), false);
    scratch_.uncertain.assign(compiled_.size(), false);
    state s;
    s.core = compiled_.prog.starts;
    sort_unique(s.core);
    s.done.assign(words_, 0);
    s.is_start = true;
    intern(std::move(s));
  }

  constexpr std::size_t size() const { return compiled_.size(); }
  constexpr const maybe<regex_error>& error(std::size_t k) const { return compiled_.errors[k]; }
  constexpr std::size_t states() const { return states_.size(); }

  /// The state after `c` from `from` (ASCII other than '\n' only).
  constexpr std::int32_t step(std::int32_t from, char c) {
    const auto slot = static_cast<std::size_t>(from) * 128 + static_cast<unsigned char>(c);
    if (table_[slot] < 0) table_[slot] = build_step(from, c);
    return table_[slot];
  }
  /// The state after walking `text` from `from`.
  constexpr std::int32_t walk(std::int32_t from, std::string_view text) {
    for (char c : text) from = step(from, c);
    return from;
  }
  /// The patterns matched when the name ends in state `at`.
  constexpr const std::vector<std::uint64_t>& finish(std::int32_t at) {
    state& s = states_[static_cast<std::size_t>(at)];
    if (!s.has_end) {
      position_context ctx;
      ctx.at_begin = s.is_start;
      ctx.at_end = true;
      ctx.has_prev = !s.is_start;
      ctx.prev = s.prev_word ? U'a' : U' ';
      load_done(s.done);
      consuming_.clear();
      closure_.run(compiled_.prog, s.core, ctx, consuming_, scratch_);
      s.end_done = to_bits(scratch_.matched);
      s.has_end = true;
    }
    return s.end_done;
  }

  /// Whether the DFA can walk `name` (ASCII without '\n').
  static constexpr bool walkable(std::string_view name) {
    for (char c : name)
      if (static_cast<unsigned char>(c) >= 128 || c == '\n') return false;
    return true;
  }

  /// Matches every pattern against `name` (the Matcher interface of the planner).
  constexpr void match(std::string_view name, pattern_hits& out) {
    out.uncertain.clear();
    if (!walkable(name)) {
      const auto res = run_nfa(compiled_.prog, text::decode_utf8(name).code_points);
      out.bits = to_bits(res.matched);
      for (std::size_t k = 0; k < res.uncertain.size(); ++k)
        if (res.uncertain[k] && !res.matched[k]) out.uncertain.push_back(static_cast<std::uint32_t>(k));
      return;
    }
    out.bits = finish(walk(start_state, name));
  }

 private:
  struct state {
    std::vector<std::uint32_t> core;  // pcs waiting for their epsilon closure
    std::vector<std::uint64_t> done;  // patterns already matched
    bool is_start = false, prev_word = false;
    bool has_end = false;
    std::vector<std::uint64_t> end_done;
    constexpr bool same(const state& o) const {
      return is_start == o.is_start && prev_word == o.prev_word && done == o.done && core == o.core;
    }
  };

  compiled_patterns compiled_;
  std::size_t words_ = 0;
  std::vector<state> states_;
  std::vector<std::int32_t> table_;  // states x 128, -1 until built
  closure_builder closure_;
  run_result scratch_;
  std::vector<std::uint32_t> consuming_;

  static constexpr void sort_unique(std::vector<std::uint32_t>& v) {
    for (std::size_t i = 1; i < v.size(); ++i)  // insertion sort: sets are small
      for (std::size_t j = i; j > 0 && v[j] < v[j - 1]; --j) std::swap(v[j], v[j - 1]);
    std::size_t n = 0;
    for (std::size_t i = 0; i < v.size(); ++i)
      if (n == 0 || v[n - 1] != v[i]) v[n++] = v[i];
    v.resize(n);
  }

  constexpr std::vector<std::uint64_t> to_bits(const std::vector<bool>& b) const {
    std::vector<std::uint64_t> out(words_, 0);
    for (std::size_t k = 0; k < b.size(); ++k)
      if (b[k]) out[k >> 6] |= std::uint64_t{1} << (k & 63);
    return out;
  }
  constexpr void load_done(const std::vector<std::uint64_t>& done) {
    for (std::size_t k = 0; k < compiled_.size(); ++k) scratch_.matched[k] = (done[k >> 6] >> (k & 63)) & 1;
  }

  constexpr std::int32_t intern(state&& s) {
    for (std::size_t i = 0; i < states_.size(); ++i)
      if (states_[i].same(s)) return static_cast<std::int32_t>(i);
    const bool dead = s.core.empty();
    const auto id = static_cast<std::int32_t>(states_.size());
    table_.resize(table_.size() + 128, dead ? id : -1);  // a dead state has nothing left to decide
    states_.push_back(std::move(s));
    return id;
  }

  constexpr std::int32_t build_step(std::int32_t from, char c) {
    const auto& prog = compiled_.prog;
    const state& s = states_[static_cast<std::size_t>(from)];
    position_context ctx;
    ctx.at_begin = s.is_start;
    ctx.has_prev = !s.is_start;
    ctx.prev = s.prev_word ? U'a' : U' ';
    ctx.has_next = true;
    ctx.next = static_cast<char32_t>(c);
    load_done(s.done);
    consuming_.clear();
    closure_.run(compiled_.prog, s.core, ctx, consuming_, scratch_);
    state t;
    for (auto pc : consuming_) {
      if (scratch_.matched[prog.owner[pc]]) continue;
      if (consumes(prog, prog.insts[pc], static_cast<char32_t>(c)) == tri::yes) t.core.push_back(pc + 1);
    }
    sort_unique(t.core);
    t.done = to_bits(scratch_.matched);
    t.prev_word = prog.uses_word_edges && is_word_ascii(static_cast<char32_t>(c));
    return intern(std::move(t));
  }
};

}  // namespace qpolicy::match
