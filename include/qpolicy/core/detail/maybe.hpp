#pragma once
// An optional value for types with non-trivial destructors (strings, vectors, configs), with the
// std::optional interface the project uses. Why not std::optional: nvcc 13's front end treats
// libstdc++'s optional<T> (and variant) of such types as non-literal, so code holding them could not
// run during constant evaluation in a .cu file. Trivial types keep std::optional.
#include <optional>
#include <type_traits>
#include <utility>

namespace qpolicy {

/// An optional T that stays a literal type for nvcc (T must be default-constructible).
template <class T>
class maybe {
 public:
  constexpr maybe() = default;
  constexpr maybe(std::nullopt_t) {}
  template <class U = T>
    requires(std::is_constructible_v<T, U &&> && !std::is_same_v<std::remove_cvref_t<U>, maybe> &&
             !std::is_same_v<std::remove_cvref_t<U>, std::nullopt_t>)
  constexpr maybe(U&& v) : engaged_(true), value_(std::forward<U>(v)) {}
  template <class U>
    requires(std::is_constructible_v<T, const U&>)
  constexpr maybe(const std::optional<U>& o) : engaged_(o.has_value()) {
    if (o) value_ = T(*o);
  }

  constexpr maybe& operator=(std::nullopt_t) {
    reset();
    return *this;
  }
  constexpr bool has_value() const { return engaged_; }
  constexpr explicit operator bool() const { return engaged_; }
  constexpr T& operator*() { return value_; }
  constexpr const T& operator*() const { return value_; }
  constexpr T* operator->() { return &value_; }
  constexpr const T* operator->() const { return &value_; }
  constexpr const T& value() const { return value_; }
  template <class U>
  constexpr T value_or(U&& fallback) const {
    if (engaged_) return value_;
    return T(std::forward<U>(fallback));
  }
  // A disengaged maybe holds T{} already: nothing to make then (the planner resets one per name).
  constexpr void reset() {
    if (!engaged_) return;
    engaged_ = false;
    value_ = T{};
  }
  template <class... A>
  constexpr T& emplace(A&&... args) {
    value_ = T(std::forward<A>(args)...);
    engaged_ = true;
    return value_;
  }
  friend constexpr bool operator==(const maybe& a, const maybe& b) {
    if (a.engaged_ != b.engaged_) return false;
    return !a.engaged_ || a.value_ == b.value_;
  }
  friend constexpr bool operator==(const maybe& a, std::nullopt_t) { return !a.engaged_; }

 private:
  bool engaged_ = false;
  T value_{};
};

}  // namespace qpolicy

namespace qpolicy {
/// std::optional where nvcc can evaluate it (trivially destructible T), maybe otherwise.
template <class T>
using optional_value = std::conditional_t<std::is_trivially_destructible_v<T>, std::optional<T>, maybe<T>>;
}  // namespace qpolicy
