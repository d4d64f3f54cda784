#pragma once
// The pattern scanner of the `regex` package (_regex_core.Source), over code points: get, peek, match
// and get_while skip whitespace and '#' comments while VERBOSE is on, exactly where the package's do,
// so that positions in error messages agree.
#include <cstdint>
#include <string_view>

#include "qpolicy/core/detail/lean_vector.hpp"
#include "qpolicy/match/detail/unicode.hpp"

namespace qpolicy::match::detail {

/// End of the pattern, as the package's empty string.
inline constexpr char32_t end_of_pattern = 0xFFFFFFFFu;

/// Python's str.isspace.
constexpr bool py_isspace(char32_t c) {
  if (c < 128) return c == U' ' || (c >= U'\t' && c <= U'\r') || (c >= 0x1C && c <= 0x1F);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

class regex_source {
 public:
  constexpr explicit regex_source(lean_vector<char32_t> text) : s_(std::move(text)) {}

  std::size_t pos = 0;
  bool ignore_space = false;

  constexpr std::size_t size() const { return s_.size(); }
  constexpr char32_t at(std::size_t i) const { return s_[i]; }
  constexpr const lean_vector<char32_t>& text() const { return s_; }

  /// Whether only whitespace and comments (under VERBOSE) remain.
  constexpr bool at_end() const {
    std::size_t p = pos;
    return !skip(p, false) || p >= s_.size();
  }

  constexpr char32_t peek(bool override_ignore = false) const {
    std::size_t p = pos;
    if (!skip(p, override_ignore)) return end_of_pattern;
    return p < s_.size() ? s_[p] : end_of_pattern;
  }
  constexpr char32_t get(bool override_ignore = false) {
    std::size_t p = pos;
    if (!skip(p, override_ignore)) {
      pos = s_.size();
      return end_of_pattern;
    }
    if (p >= s_.size()) {
      pos = p;
      return end_of_pattern;
    }
    pos = p + 1;
    return s_[p];
  }
  /// Consumes `what` when it comes next (whitespace between its characters skipped under VERBOSE).
  constexpr bool match(std::u32string_view what) {
    std::size_t p = pos;
    for (char32_t c : what) {
      if (!skip(p, false) || p >= s_.size() || s_[p] != c) return false;
      ++p;
    }
    pos = p;
    return true;
  }
  /// Consumes characters while pred(c) == include; returns them.
  template <class Pred>
  constexpr std::u32string get_while(Pred&& pred, bool include = true, bool keep_spaces = false) {
    std::u32string out;
    std::size_t p = pos;
    const bool skipping = ignore_space && !keep_spaces;
    while (true) {
      if (skipping) {
        if (!skip(p, false)) {
          p = s_.size();
          break;
        }
      }
      if (p >= s_.size() || static_cast<bool>(pred(s_[p])) != include) break;
      out += s_[p++];
    }
    pos = p;
    return out;
  }

 private:
  lean_vector<char32_t> s_;

  // Skips whitespace and comments from p under VERBOSE; false when a comment runs to the end.
  constexpr bool skip(std::size_t& p, bool override_ignore) const {
    if (!ignore_space || override_ignore) return true;
    while (p < s_.size()) {
      if (py_isspace(s_[p])) {
        ++p;
      } else if (s_[p] == U'#') {
        while (p < s_.size() && s_[p] != U'\n') ++p;
        if (p >= s_.size()) return false;
      } else {
        break;
      }
    }
    return true;
  }
};

}  // namespace qpolicy::match::detail
