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
      : compiled_(std::move(compiled)),
        words_((compiled_.size() + 63) / 64),
        core_words_((compiled_.prog.insts.size() + 64) / 64),
        closure_(compiled_.prog) {
    states_.reserve(256);  // growth would move every state (each a handful of vectors)
    index_.assign(64, -1);
    scratch_.matched.assign(compiled_.size(), false);
    next_bits_ = buffer<std::uint64_t>(core_words_);
    next_done_ = buffer<std::uint64_t>(words_);
    const auto& starts = compiled_.prog.starts;
    for (std::size_t k = 0, n = starts.size(); k < n; ++k) set_bit(next_bits_.data(), starts[k]);
    intern_next(true, false);
  }

  constexpr std::size_t size() const { return compiled_.size(); }
  constexpr bool any_error() const { return compiled_.any_error; }
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
    const auto points = text::decode_utf8(name).code_points;
    const auto res = run_nfa(compiled_.prog, points);
    out.bits = to_bits(res.matched);
    run_backtracking(compiled_, points, out);
  }

  /// Whether some pattern runs on the backtracker (its answers are not a function of DFA states).
  constexpr bool has_backtracking() const { return !compiled_.backtracking.empty(); }
  /// Whether every backtracking pattern is digit_blind (backtrack.hpp).
  constexpr bool backtracking_digit_blind() const {
    for (const auto& bp : compiled_.backtracking)
      if (!digit_blind(bp.code)) return false;
    return true;
  }
  /// Adds the backtracking patterns' answers for `name` to hits the DFA produced.
  constexpr void add_backtracking(std::string_view name, pattern_hits& out) const {
    out.over_budget.clear();
    if (compiled_.backtracking.empty()) return;
    run_backtracking(compiled_, text::decode_utf8(name).code_points, out);
  }

  /// Matches every pattern against `name` (the Matcher interface of the planner).
  constexpr void match(std::string_view name, pattern_hits& out) {
    out.over_budget.clear();
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
    add_backtracking(name, out);
  }

 private:
  struct state {
    // buffers, not vectors: cheaper to make during constant evaluation
    buffer<std::uint32_t> core;       // pcs waiting for their epsilon closure, ascending
    buffer<std::uint64_t> core_bits;  // the same set as bits: the state's identity
    buffer<std::uint64_t> done;       // patterns already matched
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
    std::uint64_t hash = 0;  // of the identity: core_bits, done, is_start, prev_word
  };

  compiled_patterns compiled_;
  std::size_t words_ = 0, core_words_ = 0;
  std::vector<state> states_;
  // Open addressing over states_ by hash (-1: empty), at most half full: a step to a state that
  // exists already costs one probe or two, and allocates nothing.
  std::vector<std::int32_t> index_;
  buffer<std::uint64_t> next_bits_, next_done_;  // the state being looked up
  closure_builder closure_;
  run_result scratch_;
  std::vector<std::uint32_t> consuming_;
  std::vector<char> last_name_;                  // the previous name match() walked
  std::vector<std::int32_t> last_states_{start_state};  // its state before each character

  static constexpr void set_bit(std::uint64_t* bits, std::uint32_t k) { bits[k >> 6] |= std::uint64_t{1} << (k & 63); }

  constexpr std::uint64_t hash_next(bool is_start, bool prev_word) const {
    std::uint64_t h = (is_start ? 0x9e3779b97f4a7c15ull : 0) ^ (prev_word ? 0x632be59bd9b4e019ull : 0);
    const std::uint64_t* b = next_bits_.data();
    for (std::size_t w = 0; w < core_words_; ++w) h = (h ^ b[w]) * 0x100000001b3ull;
    const std::uint64_t* d = next_done_.data();
    for (std::size_t w = 0; w < words_; ++w) h = (h ^ d[w]) * 0x100000001b3ull;
    return h ^ (h >> 29);
  }
  constexpr bool is_next(const state& s, std::uint64_t hash, bool is_start, bool prev_word) const {
    if (s.hash != hash || s.is_start != is_start || s.prev_word != prev_word) return false;
    const std::uint64_t *a = s.core_bits.data(), *b = next_bits_.data();
    for (std::size_t w = 0; w < core_words_; ++w)
      if (a[w] != b[w]) return false;
    const std::uint64_t *c = s.done.data(), *d = next_done_.data();
    for (std::size_t w = 0; w < words_; ++w)
      if (c[w] != d[w]) return false;
    return true;
  }

  // The state whose identity is next_bits_ / next_done_, made when new. Sets of pcs go through a
  // bitset: sorted, deduplicated and comparable in a few word operations (sorting during constant
  // evaluation costs far more); the pc list is made once per state.
  constexpr std::int32_t intern_next(bool is_start, bool prev_word) {
    const std::uint64_t h = hash_next(is_start, prev_word);
    std::size_t mask = index_.size() - 1, slot = static_cast<std::size_t>(h) & mask;
    for (std::int32_t* index = index_.data(); index[slot] >= 0; slot = (slot + 1) & mask)
      if (is_next(states_.data()[index[slot]], h, is_start, prev_word)) return index[slot];
    state s;
    s.core_bits = next_bits_;
    s.done = next_done_;
    s.edges.reserve(4);  // most states have a few edges: no regrowth
    s.hash = h;
    s.is_start = is_start;
    s.prev_word = prev_word;
    std::size_t count = 0;
    const std::uint64_t* bits = next_bits_.data();
    for (std::size_t w = 0; w < core_words_; ++w) count += static_cast<std::size_t>(__builtin_popcountll(bits[w]));
    s.core = buffer<std::uint32_t>(count);
    std::uint32_t* core = s.core.data();
    std::size_t k = 0;
    for (std::size_t w = 0; w < core_words_; ++w)
      for (std::uint64_t b = bits[w]; b; b &= b - 1)
        core[k++] = static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(b)));
    s.dead = count == 0;  // nothing left to decide: every character stays here
    const auto id = static_cast<std::int32_t>(states_.size());
    states_.push_back(std::move(s));
    index_[slot] = id;
    if (2 * states_.size() > index_.size()) rebuild_index();
    return id;
  }

  constexpr void rebuild_index() {
    index_.assign(2 * index_.size(), -1);
    const std::size_t mask = index_.size() - 1;
    std::int32_t* index = index_.data();
    for (std::size_t i = 0, n = states_.size(); i < n; ++i) {
      std::size_t slot = static_cast<std::size_t>(states_.data()[i].hash) & mask;
      while (index[slot] >= 0) slot = (slot + 1) & mask;
      index[slot] = static_cast<std::int32_t>(i);
    }
  }

  constexpr std::vector<std::uint64_t> to_bits(const std::vector<std::uint8_t>& b) const {
    std::vector<std::uint64_t> out(words_, 0);
    const std::uint8_t* p = b.data();
    for (std::size_t k = 0, n = b.size(); k < n; ++k)
      if (p[k]) out[k >> 6] |= std::uint64_t{1} << (k & 63);
    return out;
  }
  constexpr void load_done(const buffer<std::uint64_t>& done) {
    std::uint8_t* m = scratch_.matched.data();
    for (std::size_t k = 0, n = compiled_.size(); k < n; ++k) m[k] = (done[k >> 6] >> (k & 63)) & 1;
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
    std::uint64_t* bits = next_bits_.data();
    for (std::size_t w = 0; w < core_words_; ++w) bits[w] = 0;
    const std::uint8_t* matched = scratch_.matched.data();
    for (std::size_t k = 0, n = consuming_.size(); k < n; ++k) {
      const auto pc = consuming_[k];
      if (matched[prog.owner[pc]]) continue;
      if (consumes(prog, prog.insts[pc], static_cast<char32_t>(c)) == tri::yes) set_bit(bits, pc + 1);
    }
    std::uint64_t* done = next_done_.data();
    for (std::size_t w = 0; w < words_; ++w) done[w] = 0;
    for (std::size_t k = 0, n = compiled_.size(); k < n; ++k)
      if (matched[k]) set_bit(done, static_cast<std::uint32_t>(k));
    return intern_next(false, prog.uses_word_edges && is_word_ascii(static_cast<char32_t>(c)));
  }
};

}  // namespace qpolicy::match
