#include "qpolicy/match/pattern_set.hpp"

#include <algorithm>

namespace qpolicy::match {

namespace {
constexpr std::size_t max_dfa_states = 8192;

std::vector<std::uint64_t> to_bits(const std::vector<bool>& b, std::size_t words) {
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
  closure_.emplace(compiled_.prog);
  scratch_.matched.assign(compiled_.size(), false);
  scratch_.uncertain.assign(compiled_.size(), false);
  intern(std::move(start));
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
  s.next.fill(-1);
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
  closure_->run(s.core, ctx, consuming_, res);
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
  if (id >= 0) states_[static_cast<std::size_t>(from)].next[static_cast<unsigned char>(c)] = id;
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
    closure_->run(s.core, ctx, consuming_, scratch_);
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
  bool simple = !dfa_full_;
  for (char c : name) simple &= static_cast<unsigned char>(c) < 128 && c != '\n';
  if (!simple) {
    match_nfa(name, out);
    return;
  }
  std::int32_t at = 0;
  for (char c : name) {
    if (states_[static_cast<std::size_t>(at)].dead) {
      const auto& done = states_[static_cast<std::size_t>(at)].done;
      out.bits.assign(done.begin(), done.end());
      return;
    }
    std::int32_t next = states_[static_cast<std::size_t>(at)].next[static_cast<unsigned char>(c)];
    if (next < 0) next = step(at, c);
    if (next < 0) {  // the DFA cache is full: this name (and later ones) run on the NFA
      match_nfa(name, out);
      return;
    }
    at = next;
  }
  const auto& done = finish(at);
  out.bits.assign(done.begin(), done.end());
}

}  // namespace qpolicy::match
