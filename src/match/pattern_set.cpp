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
  table_.assign(classes_, -1);
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
  classes_ = count;
  // Bytes of non-ASCII characters and '\n' leave the DFA path (the NFA decides the name).
  for (std::size_t c = 128; c < 256; ++c) cls[c] = off_dfa;
  cls['\n'] = off_dfa;
}

std::int32_t pattern_set::step(std::int32_t row, char c) {
  const auto from = row / static_cast<std::int32_t>(classes_);
  if (dfa_.states() >= max_dfa_states) return -1;
  const auto to = dfa_.step(from, c);
  const auto needed = (static_cast<std::size_t>(to) + 1) * classes_;
  if (table_.size() < needed) table_.resize(std::max(needed, table_.size() * 2), -1);
  const auto next = to * static_cast<std::int32_t>(classes_);
  table_[static_cast<std::size_t>(row) + char_class_[static_cast<unsigned char>(c)]] = next;
  return next;
}

void pattern_set::match_nfa(std::string_view name, pattern_hits& out) {
  last_name_.clear();
  last_rows_.assign(1, 0);
  dfa_.match_nfa(name, out);
}

void pattern_set::match(std::string_view name, pattern_hits& out) {
  out.over_budget.clear();
  if (dfa_.size() == 0) {
    out.bits.clear();
    return;
  }
  // Layer names come in model order and share long prefixes (shards share all but the last part):
  // the DFA state after a prefix depends on the prefix alone, so resume where the last name diverged.
  std::size_t start = 0;
  const std::size_t limit = std::min(name.size(), last_name_.size());
  while (start + 8 <= limit) {  // eight bytes at a time, then the tail
    std::uint64_t a = 0, b = 0;
    std::memcpy(&a, name.data() + start, 8);
    std::memcpy(&b, last_name_.data() + start, 8);
    if (a != b) {
      start += static_cast<std::size_t>(__builtin_ctzll(a ^ b)) / 8;  // little-endian: first differing byte
      break;
    }
    start += 8;
  }
  if (start + 8 > limit)
    while (start < limit && name[start] == last_name_[start]) ++start;
  if (dfa_full_) {
    match_nfa(name, out);
    return;
  }
  last_rows_.resize(name.size() + 1);
  std::int32_t row = last_rows_[start];  // row offset of the current state in table_
  for (std::size_t i = start; i < name.size(); ++i) {
    const char c = name[i];
    const std::uint8_t cls = char_class_[static_cast<unsigned char>(c)];
    if (cls == off_dfa) {  // last_rows_ past `start` is stale now; match_nfa resets it
      match_nfa(name, out);
      return;
    }
    std::int32_t next = table_[static_cast<std::size_t>(row) + cls];
    if (next < 0) {
      next = step(row, c);
      if (next < 0) {  // the DFA is full: this name (and later ones) run on the NFA
        dfa_full_ = true;
        match_nfa(name, out);
        return;
      }
    }
    row = next;
    last_rows_[i + 1] = row;
  }
  last_name_.resize(name.size());
  std::memcpy(last_name_.data() + start, name.data() + start, name.size() - start);  // the prefix is there
  const auto& done = dfa_.finish(row / static_cast<std::int32_t>(classes_));
  out.bits.assign(done.begin(), done.end());
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
