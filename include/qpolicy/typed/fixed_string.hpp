#pragma once
// Strings as template arguments (patterns in policy types) and messages carried into diagnostics.
#include <cstddef>
#include <string_view>
#include <type_traits>

namespace qpolicy {

/// A string literal usable as a template argument: `ignore<"re:.*lm_head">`.
template <std::size_t N>
struct fixed_string {
  char data[N]{};
  constexpr fixed_string(const char (&s)[N]) {
    for (std::size_t i = 0; i < N; ++i) data[i] = s[i];
  }
  constexpr fixed_string() = default;
  constexpr std::string_view view() const { return {data, N - 1}; }
  constexpr operator std::string_view() const { return view(); }
  static constexpr std::size_t size() { return N - 1; }
};

/// Text computed during constant evaluation and shown by the compiler as a template argument.
template <std::size_t N>
struct compile_time_text {
  char text[N]{};
};

namespace detail {
template <auto Text>
struct rejected_because : std::false_type {};
}  // namespace detail

/// Stops compilation, printing `Text` (a compile_time_text) in the diagnostic. The sentence is vLLM's
/// message, exactly as the runtime front end raises it.
template <auto Text>
constexpr void compile_time_error() {
  static_assert(detail::rejected_because<Text>::value,
                "qpolicy rejected this configuration or model; the reason is the text in "
                "rejected_because<compile_time_text<N>{\"...\"}> above");
}

}  // namespace qpolicy
