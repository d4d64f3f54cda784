#pragma once
// Runtime accelerator for a compiled pattern list: a lazily built DFA over ASCII names that answers
// every pattern in one pass over the name, built from the same program the constexpr NFA runs
// (names with non-ASCII characters or '\n' take the NFA path). Patterns are compiled once per config.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "qpolicy/match/pattern.hpp"

namespace qpolicy::match {

/// A compiled pattern list with its lazy DFA. Not thread-safe: one per planning thread.
class pattern_set {
 public:
  pattern_set() = default;
  explicit pattern_set(compiled_patterns compiled);

  std::size_t size() const { return compiled_.size(); }
  const maybe<regex_error>& error(std::size_t k) const { return compiled_.errors[k]; }

  /// Matches every pattern against `name`.
  void match(std::string_view name, pattern_hits& out);
  pattern_hits match(std::string_view name) {
    pattern_hits h;
    match(name, h);
    return h;
  }
  std::size_t dfa_states() const { return states_.size(); }

 private:
  struct state {
    std::vector<std::uint32_t> core;  // pcs waiting for their epsilon closure
    std::vector<std::uint64_t> done;  // patterns already matched
    bool is_start = false, prev_word = false, dead = false, has_end = false;
    std::vector<std::uint64_t> end_done;
  };

  compiled_patterns compiled_;
  std::size_t words_ = 0;
  std::vector<state> states_;
  // Transitions, dense: table_[row + char_class_[c]] is the next state's row (state * classes_), -1
  // until built. ASCII characters every instruction treats alike share a class, so the table stays
  // small enough for L1 and a step is one dependent load.
  std::vector<std::int32_t> table_;
  std::string last_name_;                     // the previous name matched on the DFA path
  std::vector<std::int32_t> last_rows_{0};  // its row before each character (last_rows_[0] = start)
  std::array<std::uint8_t, 128> char_class_{};
  std::size_t classes_ = 0;
  std::unordered_map<std::string, std::int32_t> index_;
  bool dfa_full_ = false;
  // Scratch reused by every step: building a state must not allocate per call.
  closure_builder closure_;
  run_result scratch_;
  std::vector<std::uint32_t> consuming_;
  std::string key_;

  std::int32_t intern(state&& s);
  void load_done(const std::vector<std::uint64_t>& done);
  void build_char_classes();
  std::int32_t step(std::int32_t from, char c);
  const std::vector<std::uint64_t>& finish(std::int32_t at);
  void match_nfa(std::string_view name, pattern_hits& out) const;
};

}  // namespace qpolicy::match
