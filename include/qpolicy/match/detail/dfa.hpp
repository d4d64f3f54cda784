#pragma once
// A constexpr lazy DFA over ASCII names, built from the same program and the same epsilon closure as
// the NFA simulation (nfa.hpp): each state is the set of NFA threads waiting before a character plus
// the patterns already decided. Constant evaluation is slow (GCC 12 spends 300-700 instructions per
// expression node it evaluates), so the compile-time planner walks names on this table, one lookup
// per character, and may resume from any state it kept. A new edge costs a few hundred nodes: the
// epsilon closure of each pc is walked once (when no assertion lies on it), a state's closure once
// per state, and each edge only tests its consuming pcs against the character. Names with non-ASCII
// characters or '\n' run on the NFA.
#include <cstdint>
#include <string_view>

#include "qpolicy/core/detail/lean_vector.hpp"
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
        ident_words_(core_words_ + words_),
        ident_(initial_states * ident_words_),
        hash_(initial_states),
        flags_(initial_states),
        expansion_(2 * initial_states),
        end_(initial_states),
        index_(2 * initial_states),
        edge_key_(4 * initial_states),
        edge_to_(4 * initial_states),
        pc_closure_(compiled_.prog.insts.size() + 1),
        next_(ident_words_),
        closure_(compiled_.prog) {
    scratch_.matched.assign(compiled_.size(), false);
    const auto& starts = compiled_.prog.starts;
    for (std::size_t k = 0, n = starts.size(); k < n; ++k) set_bit(next_.data(), starts[k]);
    intern_next(flag_start);
  }

  constexpr std::size_t size() const { return compiled_.size(); }
  constexpr bool any_error() const { return compiled_.any_error; }
  constexpr const maybe<regex_error>& error(std::size_t k) const { return compiled_.errors[k]; }
  constexpr std::size_t states() const { return count_; }
  /// 64-bit words in the answers finish() returns.
  constexpr std::size_t answer_words() const { return words_; }

  /// The state after `c` from `from` (ASCII other than '\n' only).
  constexpr std::int32_t step(std::int32_t from, char c) {
    if (flags_.data()[from] & flag_dead) return from;
    const std::int32_t key = from * 128 + static_cast<std::int32_t>(static_cast<unsigned char>(c) & 127) + 1;
    const std::size_t mask = edge_key_.size() - 1;
    const std::int32_t* keys = edge_key_.data();
    for (std::size_t slot = edge_slot(key, mask); keys[slot] > 0; slot = (slot + 1) & mask)
      if (keys[slot] == key) return edge_to_.data()[slot];
    const auto to = build_step(from, c);
    add_edge(key, to);
    return to;
  }
  /// The state after walking `text` from `from`.
  constexpr std::int32_t walk(std::int32_t from, std::string_view text) {
    const char* p = text.data();
    for (std::size_t i = 0, n = text.size(); i < n; ++i) from = step(from, p[i]);
    return from;
  }
  /// The patterns matched when the name ends in state `at`: answer_words() words of bits.
  constexpr const std::uint64_t* finish(std::int32_t at) {
    if (const std::int32_t known = end_.data()[at]) return ends_.data() + (known - 1);
    const std::uint8_t f = flags_.data()[at];
    position_context ctx;
    ctx.at_begin = (f & flag_start) != 0;
    ctx.at_end = true;
    ctx.has_prev = !ctx.at_begin;
    ctx.prev = (f & flag_prev_word) ? U'a' : U' ';
    const std::uint64_t* core = core_of(at);
    load_done(core + core_words_);
    dynamic_.clear();
    for (std::size_t w = 0; w < core_words_; ++w)
      for (std::uint64_t b = core[w]; b; b &= b - 1)
        dynamic_.push_back(static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(b))));
    consuming_.clear();
    closure_.run(compiled_.prog, dynamic_, ctx, consuming_, scratch_);
    const std::size_t slot = ends_.size();
    ends_.grow_by(words_);
    std::uint64_t* out = ends_.data() + slot;
    const std::uint8_t* matched = scratch_.matched.data();
    for (std::size_t k = 0, n = compiled_.size(); k < n; ++k)
      if (matched[k]) set_bit(out, static_cast<std::uint32_t>(k));
    end_.data()[at] = static_cast<std::int32_t>(slot) + 1;
    return out;
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
    // Names come in runs that share long prefixes (a layer, then its shards): resume from the state
    // after the prefix this name shares with the previous one, which was walked, so is walkable.
    const char* p = name.data();
    const std::size_t n = name.size();
    const char* q = last_name_.data();
    std::size_t same = 0;
    for (const std::size_t limit = n < last_name_.size() ? n : last_name_.size(); same < limit && p[same] == q[same];)
      ++same;
    if (!walkable(name.substr(same))) {
      match_nfa(name, out);
      return;
    }
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
    const std::uint64_t* answers = finish(at);
    out.bits.assign(answers, answers + words_);
    add_backtracking(name, out);
  }

 private:
  // States live in flat arrays indexed by state id, not in objects with vectors of their own: during
  // constant evaluation every container made or grown costs hundreds of steps, and a plan makes a
  // few hundred states. A state's identity is its core (the pcs waiting for their epsilon closure)
  // and the patterns already decided, as bits, plus two flags; what it does next is computed once
  // per state (its expansion), not once per edge, from epsilon closures computed once per pc.
  static constexpr std::uint8_t flag_start = 1, flag_prev_word = 2, flag_dead = 4;
  // Room for this many states before the arrays double: each element made costs steps during
  // constant evaluation, and a plan's patterns usually need a few dozen states.
  static constexpr std::size_t initial_states = 64;

  compiled_patterns compiled_;
  std::size_t words_ = 0, core_words_ = 0, ident_words_ = 0;  // pattern bits, pc bits, both
  std::size_t count_ = 0;                // states
  buffer<std::uint64_t> ident_;          // per state: core bits, then done bits
  buffer<std::uint64_t> hash_;           // per state: hash of the identity
  buffer<std::uint8_t> flags_;           // per state: flag_*
  buffer<std::int32_t> expansion_;       // per state and next-character class: offset + 1 in expansions_
  buffer<std::int32_t> end_;             // per state: offset + 1 in ends_ (the answers at a name's end)
  growable<std::uint64_t> expansions_;   // per slot: consuming pcs not yet decided, then done bits
  growable<std::uint64_t> ends_;         // per slot: words_ bits
  // Open addressing (0: empty), at most half full: states by identity hash, edges by state and byte.
  buffer<std::int32_t> index_;
  buffer<std::int32_t> edge_key_, edge_to_;  // key: state * 128 + character + 1
  std::size_t edges_ = 0;
  // Per pc: 0 not known yet, 1 an assertion lies on its closure (computed per state), else slot + 2.
  buffer<std::int32_t> pc_closure_;
  growable<std::uint64_t> pc_closures_;  // per slot: consuming pcs, then matched patterns
  buffer<std::uint64_t> next_;           // the identity being looked up
  closure_builder closure_;
  run_result scratch_;
  lean_vector<std::uint32_t> consuming_, dynamic_;
  lean_vector<char> last_name_;                  // the previous name match() walked
  lean_vector<std::int32_t> last_states_{start_state};  // its state before each character

  static constexpr void set_bit(std::uint64_t* bits, std::uint32_t k) { bits[k >> 6] |= std::uint64_t{1} << (k & 63); }
  static constexpr bool test_bit(const std::uint64_t* bits, std::uint32_t k) { return (bits[k >> 6] >> (k & 63)) & 1; }
  constexpr const std::uint64_t* core_of(std::int32_t s) const { return ident_.data() + static_cast<std::size_t>(s) * ident_words_; }

  constexpr std::uint64_t hash_next(std::uint8_t flags) const {
    std::uint64_t h = ((flags & flag_start) ? 0x9e3779b97f4a7c15ull : 0) ^ ((flags & flag_prev_word) ? 0x632be59bd9b4e019ull : 0);
    const std::uint64_t* b = next_.data();
    for (std::size_t w = 0; w < ident_words_; ++w) h = (h ^ b[w]) * 0x100000001b3ull;
    return h ^ (h >> 29);
  }
  constexpr bool is_next(std::int32_t s, std::uint64_t hash, std::uint8_t flags) const {
    if (hash_.data()[s] != hash || (flags_.data()[s] & (flag_start | flag_prev_word)) != flags) return false;
    const std::uint64_t *a = core_of(s), *b = next_.data();
    for (std::size_t w = 0; w < ident_words_; ++w)
      if (a[w] != b[w]) return false;
    return true;
  }

  // The state whose identity is next_, made when new.
  constexpr std::int32_t intern_next(std::uint8_t flags) {
    const std::uint64_t h = hash_next(flags);
    std::size_t mask = index_.size() - 1, slot = static_cast<std::size_t>(h) & mask;
    std::int32_t* index = index_.data();
    for (; index[slot] > 0; slot = (slot + 1) & mask)
      if (is_next(index[slot] - 1, h, flags)) return index[slot] - 1;
    const auto id = static_cast<std::int32_t>(count_);
    if (count_ == flags_.size()) grow_states();
    const std::uint64_t* b = next_.data();
    std::uint64_t* ident = ident_.data() + count_ * ident_words_;
    bool dead = true;
    for (std::size_t w = 0; w < ident_words_; ++w) ident[w] = b[w];
    for (std::size_t w = 0; w < core_words_; ++w) dead = dead && b[w] == 0;
    hash_.data()[count_] = h;
    // Nothing left to decide: every character stays here.
    flags_.data()[count_] = static_cast<std::uint8_t>(flags | (dead ? flag_dead : 0));
    ++count_;
    index_.data()[slot] = id + 1;
    if (2 * count_ > index_.size()) rehash_states();
    return id;
  }

  constexpr void grow_states() {
    const std::size_t n = 2 * flags_.size();
    ident_.resize(n * ident_words_);
    hash_.resize(n);
    flags_.resize(n);
    expansion_.resize(2 * n);
    end_.resize(n);
  }
  constexpr void rehash_states() {
    index_ = buffer<std::int32_t>(2 * index_.size());
    const std::size_t mask = index_.size() - 1;
    std::int32_t* index = index_.data();
    const std::uint64_t* hash = hash_.data();
    for (std::size_t i = 0; i < count_; ++i) {
      std::size_t slot = static_cast<std::size_t>(hash[i]) & mask;
      while (index[slot] > 0) slot = (slot + 1) & mask;
      index[slot] = static_cast<std::int32_t>(i) + 1;
    }
  }

  static constexpr std::size_t edge_slot(std::int32_t key, std::size_t mask) {
    return static_cast<std::size_t>(static_cast<std::uint32_t>(key) * 2654435761u >> 8) & mask;
  }
  constexpr void add_edge(std::int32_t key, std::int32_t to) {
    if (2 * (edges_ + 1) > edge_key_.size()) {
      buffer<std::int32_t> keys(2 * edge_key_.size()), tos(2 * edge_key_.size());
      const std::size_t mask = keys.size() - 1;
      const std::int32_t *old_keys = edge_key_.data(), *old_tos = edge_to_.data();
      for (std::size_t i = 0, n = edge_key_.size(); i < n; ++i)
        if (old_keys[i] > 0) {
          std::size_t slot = edge_slot(old_keys[i], mask);
          while (keys.data()[slot] > 0) slot = (slot + 1) & mask;
          keys.data()[slot] = old_keys[i];
          tos.data()[slot] = old_tos[i];
        }
      edge_key_ = std::move(keys);
      edge_to_ = std::move(tos);
    }
    const std::size_t mask = edge_key_.size() - 1;
    std::size_t slot = edge_slot(key, mask);
    std::int32_t* keys = edge_key_.data();
    while (keys[slot] > 0) slot = (slot + 1) & mask;
    keys[slot] = key;
    edge_to_.data()[slot] = to;
    ++edges_;
  }

  // The epsilon closure of one pc when no assertion lies on it (then it is the same from every state):
  // the consuming pcs it reaches and the patterns it matches. Returns the pc's entry of pc_closure_.
  constexpr std::int32_t pc_closure(std::uint32_t from) {
    std::int32_t known = pc_closure_.data()[from];
    if (known) return known;
    const std::size_t at = pc_closures_.size();
    pc_closures_.grow_by(ident_words_);
    std::uint64_t* bits = pc_closures_.data() + at;
    if (!closure_.run_plain(compiled_.prog, from, bits, bits + core_words_)) {  // an assertion lies on it
      pc_closures_.shrink_to(at);
      pc_closure_.data()[from] = 1;
      return 1;
    }
    known = static_cast<std::int32_t>(at / ident_words_) + 2;
    pc_closure_.data()[from] = known;
    return known;
  }

  // Where state `s` goes before a character of class `word` (a word character, when the program
  // tests word edges): the consuming pcs of its closure whose patterns are not decided, and the
  // patterns decided. Returns its offset in expansions_.
  constexpr std::size_t expansion(std::int32_t s, bool word) {
    const std::size_t key = static_cast<std::size_t>(s) * 2 + (word ? 1 : 0);
    if (const std::int32_t known = expansion_.data()[key]) return static_cast<std::size_t>(known - 1);
    const std::size_t at = expansions_.size();
    expansions_.grow_by(ident_words_);
    std::uint64_t* out = expansions_.data() + at;
    std::uint64_t* done = out + core_words_;
    const std::uint64_t* core = core_of(s);
    for (std::size_t w = 0; w < words_; ++w) done[w] = core[core_words_ + w];
    dynamic_.clear();
    for (std::size_t w = 0; w < core_words_; ++w)
      for (std::uint64_t b = core[w]; b; b &= b - 1) {
        const auto pc = static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(b)));
        const std::int32_t k = pc_closure(pc);
        if (k == 1) {
          dynamic_.push_back(pc);
          continue;
        }
        const std::uint64_t* c = pc_closures_.data() + static_cast<std::size_t>(k - 2) * ident_words_;
        for (std::size_t v = 0; v < core_words_; ++v) out[v] |= c[v];
        for (std::size_t v = 0; v < words_; ++v) done[v] |= c[core_words_ + v];
      }
    if (!dynamic_.empty()) {  // pcs with assertions on their closure: walked in this state's context
      const std::uint8_t f = flags_.data()[s];
      position_context ctx;
      ctx.at_begin = (f & flag_start) != 0;
      ctx.has_prev = !ctx.at_begin;
      ctx.prev = (f & flag_prev_word) ? U'a' : U' ';
      ctx.has_next = true;
      ctx.next = word ? U'a' : U' ';  // any character of the class decides the assertions alike
      load_done(done);
      consuming_.clear();
      closure_.run(compiled_.prog, dynamic_, ctx, consuming_, scratch_);
      for (std::size_t k = 0, n = consuming_.size(); k < n; ++k) set_bit(out, consuming_[k]);
      const std::uint8_t* matched = scratch_.matched.data();
      for (std::size_t k = 0, n = compiled_.size(); k < n; ++k)
        if (matched[k]) set_bit(done, static_cast<std::uint32_t>(k));
    }
    // Threads of decided patterns end: their answer is final.
    const std::uint32_t* owner = compiled_.prog.owner.data();
    for (std::size_t w = 0; w < core_words_; ++w)
      for (std::uint64_t b = out[w]; b; b &= b - 1) {
        const auto pc = static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(b)));
        if (test_bit(done, owner[pc])) out[w] &= ~(std::uint64_t{1} << (pc & 63));
      }
    expansion_.data()[key] = static_cast<std::int32_t>(at) + 1;
    return at;
  }

  constexpr lean_vector<std::uint64_t> to_bits(const lean_vector<std::uint8_t>& b) const {
    lean_vector<std::uint64_t> out(words_, 0);
    const std::uint8_t* p = b.data();
    for (std::size_t k = 0, n = b.size(); k < n; ++k)
      if (p[k]) out[k >> 6] |= std::uint64_t{1} << (k & 63);
    return out;
  }
  constexpr void load_done(const std::uint64_t* done) {
    std::uint8_t* m = scratch_.matched.data();
    for (std::size_t k = 0, n = compiled_.size(); k < n; ++k) m[k] = (done[k >> 6] >> (k & 63)) & 1;
  }

  constexpr std::int32_t build_step(std::int32_t from, char c) {
    const bool word = compiled_.prog.uses_word_edges && is_word_ascii(static_cast<char32_t>(c));
    const std::size_t at = expansion(from, word);  // before data(): it may grow the pool
    const std::uint64_t* e = expansions_.data() + at;
    const inst* insts = compiled_.prog.insts.data();
    std::uint64_t* next = next_.data();
    for (std::size_t w = 0; w < ident_words_; ++w) next[w] = 0;
    for (std::size_t w = 0; w < core_words_; ++w)
      for (std::uint64_t b = e[w]; b; b &= b - 1) {
        const auto pc = static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(b)));
        const inst& in = insts[pc];
        const bool takes = in.code == op::literal ? in.a == static_cast<std::uint32_t>(static_cast<unsigned char>(c))
                                                  : consumes(compiled_.prog, in, static_cast<char32_t>(c)) == tri::yes;
        if (takes) set_bit(next, pc + 1);
      }
    for (std::size_t w = 0; w < words_; ++w) next[core_words_ + w] = e[core_words_ + w];
    return intern_next(word ? flag_prev_word : 0);
  }
};

}  // namespace qpolicy::match
