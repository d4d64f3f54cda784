#include "qpolicy/match/pattern_set.hpp"

#include <algorithm>
#include <cstring>

namespace qpolicy::match {

namespace {
constexpr std::size_t max_dfa_states = 8192;

std::vector<std::uint64_t> to_bits(const std::vector<std::uint8_t>& b, std::size_t words) {
  std::vector<std::uint64_t> out(words, 0);
  for (std::size_t k = 0; k < b.size(); ++k)
    if (b[k]) out[k >> 6] |= std::uint64_t{1} << (k & 63);
  return out;
}
}  // namespace

pattern_set::pattern_set(compiled_patterns compiled) : compiled_(std::move(compiled)) {
  words_ = (compiled_.size() + 63) / 64;
  state start;
  start.core = compiled_.prog.starts;
  std::sort(start.core.begin(), start.core.end());
  start.done.assign(words_, 0);
  start.is_start = true;
  build_char_classes();
  closure_ = closure_builder(compiled_.prog);
  scratch_.matched.assign(compiled_.size(), false);
  scratch_.uncertain.assign(compiled_.size(), false);
  intern(std::move(start));
}

void pattern_set::build_char_classes() {
  // Partition refinement: split the classes by every set's membership, by '\n' and by word-ness,
  // renumbering densely after each split so ids stay below 128.
  std::array<std::uint8_t, 128>& cls = char_class_;
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
  for (const auto& set : compiled_.prog.sets) {
    const std::pair<std::uint64_t, std::uint64_t> bits{set.ascii[0], set.ascii[1]};
    if (std::find(seen.begin(), seen.end(), bits) != seen.end()) continue;
    seen.push_back(bits);
    // Negation does not change the partition a set induces, so the raw bits suffice.
    split([&](char32_t c) { return c < 64 ? ((bits.first >> c) & 1) != 0 : ((bits.second >> (c - 64)) & 1) != 0; });
  }
  split([](char32_t c) { return c == U'\n'; });
  if (compiled_.prog.uses_word_edges) split([](char32_t c) { return is_word_ascii(c); });
  classes_ = count;
}

void pattern_set::load_done(const std::vector<std::uint64_t>& done) {
  for (std::size_t k = 0; k < compiled_.size(); ++k) scratch_.matched[k] = (done[k >> 6] >> (k & 63)) & 1;
}

std::int32_t pattern_set::intern(state&& s) {
  std::string& key = key_;
  key.clear();
  key += static_cast<char>(s.is_start);
  key += static_cast<char>(s.prev_word);
  key.append(reinterpret_cast<const char*>(s.done.data()), s.done.size() * 8);
  key.append(reinterpret_cast<const char*>(s.core.data()), s.core.size() * 4);
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  if (states_.size() >= max_dfa_states) {
    dfa_full_ = true;
    return -1;
  }
  s.dead = s.core.empty();
  const auto row = static_cast<std::int32_t>(table_.size());
  // A dead state has nothing left to decide: its row loops to itself, so the scan needs no test.
  table_.resize(table_.size() + classes_, s.dead ? row : -1);
  states_.push_back(std::move(s));
  const auto id = static_cast<std::int32_t>(states_.size() - 1);
  index_.emplace(key, id);
  return id;
}

std::int32_t pattern_set::step(std::int32_t from, char c) {
  const auto& prog = compiled_.prog;
  const state& s = states_[static_cast<std::size_t>(from)];
  position_context ctx;
  ctx.at_begin = s.is_start;
  ctx.has_prev = !s.is_start;
  ctx.prev = s.prev_word ? U'a' : U' ';
  ctx.has_next = true;
  ctx.next = static_cast<char32_t>(c);
  load_done(s.done);
  run_result& res = scratch_;
  consuming_.clear();
  closure_.run(compiled_.prog, s.core, ctx, consuming_, res);
  state t;
  for (auto pc : consuming_) {
    if (res.matched[prog.owner[pc]]) continue;
    if (consumes(prog, prog.insts[pc], static_cast<char32_t>(c)) == tri::yes) t.core.push_back(pc + 1);
  }
  std::sort(t.core.begin(), t.core.end());
  t.core.erase(std::unique(t.core.begin(), t.core.end()), t.core.end());
  t.done = to_bits(res.matched, words_);
  t.prev_word = prog.uses_word_edges && is_word_ascii(static_cast<char32_t>(c));
  const auto id = intern(std::move(t));
  if (id >= 0)
    table_[static_cast<std::size_t>(from) * classes_ + char_class_[static_cast<unsigned char>(c)]] =
        id * static_cast<std::int32_t>(classes_);
  return id;
}

const std::vector<std::uint64_t>& pattern_set::finish(std::int32_t at) {
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
    s.end_done = to_bits(scratch_.matched, words_);
    s.has_end = true;
  }
  return s.end_done;
}

void pattern_set::match_nfa(std::string_view name, pattern_hits& out) const {
  const auto res = run_nfa(compiled_.prog, text::decode_utf8(name).code_points);
  out.bits = to_bits(res.matched, words_);
  for (std::size_t k = 0; k < res.uncertain.size(); ++k)
    if (res.uncertain[k] && !res.matched[k]) out.uncertain.push_back(static_cast<std::uint32_t>(k));
}

void pattern_set::match(std::string_view name, pattern_hits& out) {
  out.uncertain.clear();
  if (compiled_.size() == 0) {
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
  bool simple = !dfa_full_;
  for (std::size_t i = start; i < name.size(); ++i) simple &= static_cast<unsigned char>(name[i]) < 128 && name[i] != '\n';
  if (!simple) {
    last_name_.clear();
    last_rows_.assign(1, 0);
    match_nfa(name, out);
    return;
  }
  last_rows_.resize(name.size() + 1);
  std::int32_t row = last_rows_[start];  // row offset of the current state in table_
  for (std::size_t i = start; i < name.size(); ++i) {
    const char c = name[i];
    std::int32_t next = table_[static_cast<std::size_t>(row) + char_class_[static_cast<unsigned char>(c)]];
    if (next < 0) {
      const auto id = step(row / static_cast<std::int32_t>(classes_), c);
      if (id < 0) {  // the DFA cache is full: this name (and later ones) run on the NFA
        last_name_.clear();
        last_rows_.assign(1, 0);
        match_nfa(name, out);
        return;
      }
      next = id * static_cast<std::int32_t>(classes_);
    }
    row = next;
    last_rows_[i + 1] = row;
  }
  last_name_.assign(name);
  const auto& done = finish(row / static_cast<std::int32_t>(classes_));
  out.bits.assign(done.begin(), done.end());
}

}  // namespace qpolicy::match
