#pragma once
// Checked int64 arithmetic: every size that comes from input (tensor shapes, byte offsets, shard sums,
// expert indices, allocation sizes, thread splits) is computed through these, so a hostile dimension is
// an error with a message instead of signed overflow, a wrapped allocation or an endless loop.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace qpolicy::checked {

/// a * b, or nothing when the product does not fit in int64.
constexpr std::optional<std::int64_t> mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
/// a + b, or nothing when the sum does not fit in int64.
constexpr std::optional<std::int64_t> add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
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
