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
    states_.reserve(256);  // growth would move every state (each a handful of vectors)
    scratch_.matched.assign(compiled_.size(), false);
    scratch_.uncertain.assign(compiled_.size(), false);
    state s;
    set_core(s, compiled_.prog.starts);
    s.done.assign(words_, 0);
    s.is_start = true;
    intern(std::move(s));
  }

  constexpr std::size_t size() const { return compiled_.size(); }
  constexpr const maybe<regex_error>& error(std::size_t k) const { return compiled_.errors[k]; }
  constexpr std::size_t states() const { return states_.size(); }

  /// The state after `c` from `from` (ASCII other than '\n' only).
  constexpr std::int32_t step(std::int32_t from, char c) {
    // Raw pointers and index loops: iterators and range-for cost several times more per element
    // during constant evaluation.
    const state* s = states_.data() + from;
    if (s->dead) return from;
    const auto* e = s->edges.data();
    for (std::size_t k = 0, n = s->edges.size(); k < n; ++k)
      if (e[k].c == c) return e[k].to;
    const auto to = build_step(from, c);
    states_[static_cast<std::size_t>(from)].edges.push_back({c, to});
    return to;
  }
  /// The state after walking `text` from `from`.
  constexpr std::int32_t walk(std::int32_t from, std::string_view text) {
    const char* p = text.data();
    for (std::size_t i = 0, n = text.size(); i < n; ++i) from = step(from, p[i]);
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
    const char* p = name.data();
    for (std::size_t i = 0, n = name.size(); i < n; ++i)
      if (static_cast<unsigned char>(p[i]) >= 128 || p[i] == '\n') return false;
    return true;
  }

  /// Matches every pattern against `name` on the NFA (any name; no DFA state is built).
  constexpr void match_nfa(std::string_view name, pattern_hits& out) const {
    const auto res = run_nfa(compiled_.prog, text::decode_utf8(name).code_points);
    out.bits = to_bits(res.matched);
    out.uncertain.clear();
    for (std::size_t k = 0; k < res.uncertain.size(); ++k)
      if (res.uncertain[k] && !res.matched[k]) out.uncertain.push_back(static_cast<std::uint32_t>(k));
  }

  /// Matches every pattern against `name` (the Matcher interface of the planner).
  constexpr void match(std::string_view name, pattern_hits& out) {
    out.uncertain.clear();
    if (!walkable(name)) {
      match_nfa(name, out);
      return;
    }
    // Names come in runs that share long prefixes (a layer, then its shards): resume from the state
    // after the prefix this name shares with the previous one.
    const char* p = name.data();
    const std::size_t n = name.size();
    const char* q = last_name_.data();
    std::size_t same = 0;
    for (const std::size_t limit = n < last_name_.size() ? n : last_name_.size(); same < limit && p[same] == q[same];)
      ++same;
    last_name_.resize(n);
    last_states_.resize(n + 1);
    char* keep = last_name_.data();
    std::int32_t* states = last_states_.data();
    std::int32_t at = states[same];
    for (std::size_t i = same; i < n; ++i) {
      keep[i] = p[i];
      at = step(at, p[i]);
      states[i + 1] = at;
    }
    out.bits = finish(at);
  }

 private:
  struct state {
    std::vector<std::uint32_t> core;       // pcs waiting for their epsilon closure, ascending
    std::vector<std::uint64_t> core_bits;  // the same set as bits: the state's identity
    std::vector<std::uint64_t> done;       // patterns already matched
    bool is_start = false, prev_word = false, dead = false;
    bool has_end = false;
    // Sparse edges, not a 128-wide row: every element a vector initializes costs hundreds of steps
    // during constant evaluation, and a state uses few characters.
    struct edge {
      char c;
      std::int32_t to;
    };
    std::vector<edge> edges;
    std::vector<std::uint64_t> end_done;
    std::uint64_t hash = 0;  // of the identity below: most comparisons stop here
    constexpr void rehash() {
      std::uint64_t h = (is_start ? 0x9e3779b97f4a7c15ull : 0) ^ (prev_word ? 0x632be59bd9b4e019ull : 0);
      for (std::size_t w = 0, n = core_bits.size(); w < n; ++w) h = (h ^ core_bits.data()[w]) * 0x100000001b3ull;
      for (std::size_t w = 0, n = done.size(); w < n; ++w) h = (h ^ done.data()[w]) * 0x100000001b3ull;
      hash = h;
    }
    constexpr bool same(const state& o) const {
      if (hash != o.hash || is_start != o.is_start || prev_word != o.prev_word) return false;
      for (std::size_t w = 0, n = core_bits.size(); w < n; ++w)
        if (core_bits.data()[w] != o.core_bits.data()[w]) return false;
      for (std::size_t w = 0, n = done.size(); w < n; ++w)
        if (done.data()[w] != o.done.data()[w]) return false;
      return true;
    }
  };

  compiled_patterns compiled_;
  std::size_t words_ = 0;
  std::vector<state> states_;
  closure_builder closure_;
  run_result scratch_;
  std::vector<std::uint32_t> consuming_, next_;
  std::vector<char> last_name_;                  // the previous name match() walked
  std::vector<std::int32_t> last_states_{start_state};  // its state before each character

  // Sets of pcs go through a bitset: sorted, deduplicated and comparable in a few word operations
  // (sorting during constant evaluation costs far more).
  constexpr void set_core(state& s, const std::vector<std::uint32_t>& pcs) const {
    s.core_bits.assign((compiled_.prog.insts.size() + 64) / 64, 0);
    std::uint64_t* bits = s.core_bits.data();
    for (std::size_t k = 0, n = pcs.size(); k < n; ++k) bits[pcs[k] >> 6] |= std::uint64_t{1} << (pcs[k] & 63);
    std::size_t count = 0;
    for (std::size_t w = 0, n = s.core_bits.size(); w < n; ++w) count += static_cast<std::size_t>(__builtin_popcountll(bits[w]));
    s.core.resize(count);  // one allocation, no growth
    std::uint32_t* core = s.core.data();
    std::size_t k = 0;
    for (std::size_t w = 0, n = s.core_bits.size(); w < n; ++w)
      for (std::uint64_t b = bits[w]; b; b &= b - 1)
        core[k++] = static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(b)));
  }

  constexpr std::vector<std::uint64_t> to_bits(const std::vector<std::uint8_t>& b) const {
    std::vector<std::uint64_t> out(words_, 0);
    const std::uint8_t* p = b.data();
    for (std::size_t k = 0, n = b.size(); k < n; ++k)
      if (p[k]) out[k >> 6] |= std::uint64_t{1} << (k & 63);
    return out;
  }
  constexpr void load_done(const std::vector<std::uint64_t>& done) {
    std::uint8_t* m = scratch_.matched.data();
    for (std::size_t k = 0, n = compiled_.size(); k < n; ++k) m[k] = (done[k >> 6] >> (k & 63)) & 1;
  }

  constexpr std::int32_t intern(state&& s) {
    s.rehash();
    for (std::size_t i = 0, n = states_.size(); i < n; ++i)
      if (states_.data()[i].same(s)) return static_cast<std::int32_t>(i);
    s.dead = s.core.empty();  // nothing left to decide: every character stays here
    const auto id = static_cast<std::int32_t>(states_.size());
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
    next_.clear();
    const std::uint8_t* matched = scratch_.matched.data();
    for (std::size_t k = 0, n = consuming_.size(); k < n; ++k) {
      const auto pc = consuming_[k];
      if (matched[prog.owner[pc]]) continue;
      if (consumes(prog, prog.insts[pc], static_cast<char32_t>(c)) == tri::yes) next_.push_back(pc + 1);
    }
    set_core(t, next_);
    t.done = to_bits(scratch_.matched);
    t.prev_word = prog.uses_word_edges && is_word_ascii(static_cast<char32_t>(c));
    return intern(std::move(t));
  }
};

}  // namespace qpolicy::match
