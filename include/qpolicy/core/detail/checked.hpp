#pragma once
// Checked int64 arithmetic: every size that comes from input (tensor shapes, byte offsets, shard sums,
// expert indices, allocation sizes, thread splits) is computed through these, so a hostile dimension is
// an error with a message instead of signed overflow, a wrapped allocation or an endless loop.
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace qpolicy::checked {

// Plain comparisons rather than __builtin_*_overflow: nvcc's front end cannot run the builtins during
// constant evaluation, and the typed model definitions check shard sums at compile time in .cu files.
inline constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();
inline constexpr std::int64_t int64_min = std::numeric_limits<std::int64_t>::min();

/// a * b, or nothing when the product does not fit in int64.
constexpr std::optional<std::int64_t> mul(std::int64_t a, std::int64_t b) {
  if (a == 0 || b == 0) return std::int64_t{0};
  if ((a == -1 && b == int64_min) || (b == -1 && a == int64_min)) return std::nullopt;
  const bool same_sign = (a > 0) == (b > 0);
  // |a * b| <= limit, checked by division: limit / |b| >= |a| (b != 0, no overflow in the division).
  if (same_sign ? (a > 0 ? a > int64_max / b : a < int64_max / b) : (a > 0 ? b < int64_min / a : a < int64_min / b))
    return std::nullopt;
  return a * b;
}
/// a + b, or nothing when the sum does not fit in int64.
constexpr std::optional<std::int64_t> add(std::int64_t a, std::int64_t b) {
  if ((b > 0 && a > int64_max - b) || (b < 0 && a < int64_min - b)) return std::nullopt;
  return a + b;
}
/// ceil(a / b) for a >= 0, b > 0, without the a + b - 1 that overflows near the top of the range.
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); }

/// The element count of a shape, or nothing when a dimension is negative or the product of its
/// non-zero dimensions does not fit in int64. (Zero dimensions are skipped for the overflow test, so
/// [2^40, 2^40, 0] is refused too: no later computation on such a shape can be trusted.)
constexpr std::optional<std::int64_t> elements(std::span<const std::int64_t> shape) {
  std::int64_t nonzero = 1;
  bool empty = false;
  for (const auto d : shape) {
    if (d < 0) return std::nullopt;
    if (d == 0) {
      empty = true;
      continue;
    }
    const auto p = mul(nonzero, d);
    if (!p) return std::nullopt;
    nonzero = *p;
  }
  return empty ? 0 : nonzero;
}

/// Bytes of `count` elements of `width` bytes, or nothing on overflow.
constexpr std::optional<std::int64_t> bytes(std::int64_t count, std::int64_t width) { return mul(count, width); }

/// Parses a decimal index (digits only, no sign) below `limit`; nothing when it is not one.
constexpr std::optional<std::int64_t> parse_index(std::string_view digits, std::int64_t limit) {
  if (digits.empty() || digits.size() > 19) return std::nullopt;
  std::int64_t v = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto next = mul(v, 10);
    if (!next) return std::nullopt;
    const auto sum = add(*next, c - '0');
    if (!sum) return std::nullopt;
    v = *sum;
  }
  if (v >= limit) return std::nullopt;
  return v;
}

/// A shape as the user wrote it: "[a, b]" (unsigned, so 2^64 - 1 never prints as -1).
inline std::string shape_text(std::span<const std::uint64_t> dims) {
  std::string r = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) r += (i ? ", " : "") + std::to_string(dims[i]);
  return r + "]";
}
inline std::string shape_text(std::span<const std::int64_t> dims) {
  std::string r = "[";
  for (std::size_t i = 0; i < dims.size(); ++i)
    r += (i ? ", " : "") + std::to_string(static_cast<std::uint64_t>(dims[i]));
  return r + "]";
}

}  // namespace qpolicy::checked
