#pragma once
// Runtime accelerator for a compiled pattern list: the constexpr lazy DFA of dfa.hpp (same states,
// same construction) with a dense transition table over character classes on top, and the scan
// resumed where a name diverges from the previous one. Names with non-ASCII characters or '\n' take
// the NFA path. Patterns are compiled once per config.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qpolicy/core/detail/lean_vector.hpp"
#include "qpolicy/match/detail/dfa.hpp"

namespace qpolicy::match {

/// A compiled pattern list with its lazy DFA. Not thread-safe: one per planning thread.
class pattern_set {
 public:
  pattern_set() = default;
  explicit pattern_set(compiled_patterns compiled);

  std::size_t size() const { return dfa_.size(); }
  bool any_error() const { return dfa_.any_error(); }
  const maybe<regex_error>& error(std::size_t k) const { return dfa_.error(k); }

  /// Matches every pattern against `name`.
  void match(std::string_view name, pattern_hits& out);
  pattern_hits match(std::string_view name) {
    pattern_hits h;
    match(name, h);
    return h;
  }
  std::size_t dfa_states() const { return dfa_.states(); }

 private:
  dfa_pattern_set dfa_;
  // Transitions, dense: table_[row + char_class_[c]] is the next state's row (state * stride_), -1
  // until looked up. ASCII characters every instruction treats alike share a class, so the table
  // stays small enough for L1 and a step is one dependent load.
  lean_vector<std::int32_t> table_;
  lean_vector<std::uint64_t> end_word_;  // by row, as table_: the answers at a name's end (< 64 patterns)
  std::string last_name_;                    // the previous name matched on the DFA path: its first
  std::size_t last_size_ = 0;                // last_size_ bytes (0 after a name the NFA decided)
  lean_vector<std::int32_t> last_rows_{0};  // its row before each character (last_rows_[0] = start)
  std::array<std::uint8_t, 256> char_class_{};  // per byte; off_class_ for '\n' and non-ASCII bytes
  std::uint8_t off_class_ = 0;  // the last column of the table: class ids stay below 128
  std::size_t stride_ = 1;      // columns per row: the classes and off_class_
  bool dfa_full_ = false;

  void build_char_classes(const program& prog);
  std::int32_t step(std::int32_t row, char c);
  void match_nfa(std::string_view name, pattern_hits& out);
};

/// A pattern_set checked out of a process-wide pool keyed by the pattern list and glob mode: a config
/// planned again (a server planning each request, a tool planning several models) reuses the compiled
/// patterns and every DFA state the earlier plans built. Held exclusively (a pattern_set is not
/// thread-safe: two plans of one config at once compile two), and put back when destroyed; the pool
/// keeps the most recently returned sets (pool_capacity), each bounded by its DFA state limit.
class pooled_pattern_set {
 public:
  static constexpr std::size_t pool_capacity = 8;

  static pooled_pattern_set acquire(const std::vector<std::string>& patterns, glob_mode mode);
  pooled_pattern_set() = default;
  pooled_pattern_set(pooled_pattern_set&& o) noexcept = default;
  pooled_pattern_set& operator=(pooled_pattern_set&& o) noexcept;
  ~pooled_pattern_set();

  std::size_t size() const { return set_->size(); }
  bool any_error() const { return set_->any_error(); }
  const maybe<regex_error>& error(std::size_t k) const { return set_->error(k); }
  void match(std::string_view name, pattern_hits& out) { set_->match(name, out); }

  /// How many sets the pool holds now (tests, diagnostics).
  static std::size_t pooled();

 private:
  glob_mode mode_ = glob_mode::on;
  std::vector<std::string> patterns_;
  std::unique_ptr<pattern_set> set_;
  void give_back();
};

}  // namespace qpolicy::match
