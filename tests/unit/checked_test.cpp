// Checked int64 arithmetic: the plain comparisons (which nvcc can run at compile time) agree with the
// compiler's overflow builtins on the edges of the range and on random operands of every magnitude.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>

#include "qpolicy/core/detail/checked.hpp"

namespace checked = qpolicy::checked;

static_assert(!checked::mul(checked::int64_max, 2));
static_assert(*checked::mul(-3037000499LL, 3037000499LL) == -9223372030926249001LL);
static_assert(!checked::add(checked::int64_max, 1) && *checked::add(checked::int64_min, checked::int64_max) == -1);

TEST_CASE("checked add and mul agree with the overflow builtins", "[checked]") {
  const std::int64_t edges[] = {0, 1, -1, 2, -2, 3, checked::int64_max, checked::int64_min, checked::int64_max / 2,
                                checked::int64_min / 2, 1LL << 31, -(1LL << 31), 1LL << 32, 3037000499LL, 3037000500LL,
                                -3037000499LL, -3037000500LL};
  std::mt19937_64 rng(GENERATE(1, 2, 3));
  auto agree = [](std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    const bool mul_overflows = __builtin_mul_overflow(a, b, &r);
    const auto m = checked::mul(a, b);
    if (mul_overflows == m.has_value() || (m && *m != r)) return false;
    const bool add_overflows = __builtin_add_overflow(a, b, &r);
    const auto s = checked::add(a, b);
    return add_overflows != s.has_value() && (!s || *s == r);
  };
  for (auto a : edges)
    for (auto b : edges) {
      INFO(a << ", " << b);
      REQUIRE(agree(a, b));
    }
  for (int i = 0; i < 300000; ++i) {
    const std::int64_t a = static_cast<std::int64_t>(rng()) >> (rng() % 64), b = static_cast<std::int64_t>(rng()) >> (rng() % 64);
    if (!agree(a, b)) {
      INFO(a << ", " << b);
      REQUIRE(agree(a, b));
    }
  }
}
