#include "qpolicy/match/pattern_set.hpp"

#include <algorithm>
#include <cstring>
#include <list>
#include <mutex>

namespace qpolicy::match {

namespace {
// Past this many DFA states a config is pathological: its names run on the NFA instead.
constexpr std::size_t max_dfa_states = 8192;
}  // namespace

pattern_set::pattern_set(compiled_patterns compiled) {
  build_char_classes(compiled.prog);
  dfa_ = dfa_pattern_set(std::move(compiled));
  table_.assign(stride_, -1);
}

void pattern_set::build_char_classes(const program& prog) {
  // Partition refinement: split the classes by every set's membership, by '\n' and by word-ness,
  // renumbering densely after each split so ids stay below 128.
  std::array<std::uint8_t, 256>& cls = char_class_;
  cls.fill(0);
  std::size_t count = 1;
  auto split = [&](auto&& member) {
    std::array<std::int16_t, 256> id;
    id.fill(-1);
    std::size_t next = 0;
    for (char32_t c = 0; c < 128; ++c) {
      auto& slot = id[cls[c] * 2u + (member(c) ? 1u : 0u)];
      if (slot < 0) slot = static_cast<std::int16_t>(next++);
      cls[c] = static_cast<std::uint8_t>(slot);
    }
    count = next;
  };
  // Literal sets repeat (every character of every exact pattern is one): split once per distinct set.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> seen;
  for (const auto& set : prog.sets) {
    const std::pair<std::uint64_t, std::uint64_t> bits{set.ascii[0], set.ascii[1]};
    if (std::find(seen.begin(), seen.end(), bits) != seen.end()) continue;
    seen.push_back(bits);
    // Negation does not change the partition a set induces, so the raw bits suffice.
    split([&](char32_t c) { return c < 64 ? ((bits.first >> c) & 1) != 0 : ((bits.second >> (c - 64)) & 1) != 0; });
  }
  std::uint64_t literals[2] = {0, 0};  // each ASCII literal character is a class of its own
  for (const auto& in : prog.insts) {
    if (in.code == op::literal && in.a < 128) literals[in.a >> 6] |= std::uint64_t{1} << (in.a & 63);
    // A case-insensitive literal: its ASCII cases form one class (a non-ASCII case never reaches the DFA).
    if (in.code == op::literal_fold) split([&in](char32_t d) { return folded_equal(in.a, d, in.b != 0); });
  }
  for (char32_t c = 0; c < 128; ++c)
    if ((literals[c >> 6] >> (c & 63)) & 1) split([c](char32_t d) { return d == c; });
  split([](char32_t c) { return c == U'\n'; });
  if (prog.uses_word_edges) split([](char32_t c) { return is_word_ascii(c); });
  // Bytes of non-ASCII characters and '\n' leave the DFA path (the NFA decides the name): their class,
  // the last column, never gets a transition, so the scan finds them on its slow path.
  off_class_ = static_cast<std::uint8_t>(count);
  stride_ = count + 1;
  for (std::size_t c = 128; c < 256; ++c) cls[c] = off_class_;
  cls['\n'] = off_class_;
}

std::int32_t pattern_set::step(std::int32_t row, char c) {
  const auto from = row / static_cast<std::int32_t>(stride_);
  if (dfa_.states() >= max_dfa_states) return -1;
  const auto to = dfa_.step(from, c);
  const auto needed = (static_cast<std::size_t>(to) + 1) * stride_;
  if (table_.size() < needed) table_.resize(std::max(needed, table_.size() * 2), -1);
  const auto next = to * static_cast<std::int32_t>(stride_);
  table_[static_cast<std::size_t>(row) + char_class_[static_cast<unsigned char>(c)]] = next;
  return next;
}

void pattern_set::match_nfa(std::string_view name, pattern_hits& out) {
  last_size_ = 0;
  dfa_.match_nfa(name, out);
}

// Aligned to a cache line: the plan benchmark moved by 3-4% (identical instruction counts) with where
// the linker happened to place this function, whose loop is the planner's hot path.
__attribute__((aligned(64))) void pattern_set::match(std::string_view name, pattern_hits& out) {
  out.over_budget.clear();
  if (dfa_.size() == 0) {
    out.bits.clear();
    return;
  }
  // Layer names come in model order and share long prefixes (shards share all but the last part):
  // the DFA state after a prefix depends on the prefix alone, so resume where the last name diverged.
  const char* text = name.data();
  const std::size_t n = name.size();
  const char* last = last_name_.data();
  std::size_t start = 0;
  const std::size_t limit = std::min(n, last_size_);
  while (start + 8 <= limit) {  // eight bytes at a time, then the tail
    std::uint64_t a = 0, b = 0;
    std::memcpy(&a, text + start, 8);
    std::memcpy(&b, last + start, 8);
    if (a != b) {
      start += static_cast<std::size_t>(__builtin_ctzll(a ^ b)) / 8;  // little-endian: first differing byte
      break;
    }
    start += 8;
  }
  if (start + 8 > limit)
    while (start < limit && text[start] == last[start]) ++start;
  if (dfa_full_) {
    match_nfa(name, out);
    return;
  }
  // The buffers only grow: entries past last_size_ are never read.
  if (last_name_.size() < n) {
    last_name_.resize(std::max(n, 2 * last_name_.size()));
    last_rows_.resize(last_name_.size() + 1);
  }
  // Locals, not members, in the loop: stores through the buffers could alias the members otherwise,
  // and each step would reload them.
  const std::int32_t* table = table_.data();
  std::int32_t* rows = last_rows_.data();
  char* keep = last_name_.data();
  const std::uint8_t* classes = char_class_.data();
  std::int32_t row = rows[start];  // row offset of the current state in table_
  for (std::size_t i = start; i < n; ++i) {
    const char c = text[i];
    const std::uint8_t cls = classes[static_cast<unsigned char>(c)];
    std::int32_t next = table[static_cast<std::size_t>(row) + cls];
    if (next < 0) {  // a transition not built yet, or a character off the DFA path
      if (cls == off_class_) {
        match_nfa(name, out);
        return;
      }
      next = step(row, c);
      if (next < 0) {  // the DFA is full: this name (and later ones) run on the NFA
        dfa_full_ = true;
        match_nfa(name, out);
        return;
      }
      table = table_.data();  // step may have grown the table
    }
    row = next;
    keep[i] = c;
    rows[i + 1] = row;
  }
  last_size_ = n;
  if (dfa_.size() < 64) {  // one word of answers, cached per row (bit 63 marks it known)
    constexpr std::uint64_t known = std::uint64_t{1} << 63;
    if (end_word_.size() < table_.size()) end_word_.resize(table_.size(), 0);
    std::uint64_t& w = end_word_[static_cast<std::size_t>(row)];
    if (!(w & known)) w = dfa_.finish(row / static_cast<std::int32_t>(stride_))[0] | known;
    if (out.bits.size() != 1) out.bits.assign(1, 0);
    out.bits[0] = w & ~known;
  } else {
    const std::uint64_t* done = dfa_.finish(row / static_cast<std::int32_t>(stride_));
    out.bits.assign(done, done + dfa_.answer_words());
  }
  dfa_.add_backtracking(name, out);
}

namespace {

struct pool_entry {
  glob_mode mode;
  std::vector<std::string> patterns;
  std::unique_ptr<pattern_set> set;
};

struct set_pool {
  std::mutex mutex;
  std::list<pool_entry> entries;  // most recently returned first
};

set_pool& the_pool() {
  static set_pool pool;  // never destroyed before a pooled set: function-local, built on first use
  return pool;
}

}  // namespace

pooled_pattern_set pooled_pattern_set::acquire(const std::vector<std::string>& patterns, glob_mode mode) {
  pooled_pattern_set out;
  out.mode_ = mode;
  out.patterns_ = patterns;
  {
    auto& pool = the_pool();
    std::lock_guard lock(pool.mutex);
    for (auto it = pool.entries.begin(); it != pool.entries.end(); ++it)
      if (it->mode == mode && it->patterns == patterns) {
        out.set_ = std::move(it->set);
        pool.entries.erase(it);
        return out;
      }
  }
  out.set_ = std::make_unique<pattern_set>(compile_patterns(patterns, mode));  // outside the lock
  return out;
}

pooled_pattern_set& pooled_pattern_set::operator=(pooled_pattern_set&& o) noexcept {
  if (this != &o) {
    give_back();
    mode_ = o.mode_;
    patterns_ = std::move(o.patterns_);
    set_ = std::move(o.set_);
  }
  return *this;
}

pooled_pattern_set::~pooled_pattern_set() { give_back(); }

void pooled_pattern_set::give_back() {
  if (!set_) return;
  auto& pool = the_pool();
  std::lock_guard lock(pool.mutex);
  pool.entries.push_front({mode_, std::move(patterns_), std::move(set_)});
  if (pool.entries.size() > pool_capacity) pool.entries.pop_back();
}

std::size_t pooled_pattern_set::pooled() {
  auto& pool = the_pool();
  std::lock_guard lock(pool.mutex);
  return pool.entries.size();
}

}  // namespace qpolicy::match
