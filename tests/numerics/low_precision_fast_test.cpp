// Property tests: the CPU fast path of every low-precision formula (threads, shared block arithmetic)
// equals the CPU reference bit for bit on random shapes and on the values the spec singles out:
// zero, subnormal-range and huge blocks, NaN and infinity where the input type has them, e2m1 ties,
// amax at the EVEN and e4m3 boundaries, negative zeros; bf16, fp16 and (where the formula takes it)
// fp32 inputs; row-major and 128x4 block scales.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "../support/random_operands.hpp"
#include "../support/type_lists.hpp"
#include "low_precision_impls.hpp"

namespace qp = qpolicy;
namespace fp8 = qpolicy::fp8;
using namespace qpolicy::test::low_precision;

namespace {

// Random inputs: blocks drawn from a few regimes so that every edge of every formula occurs.
using sample = qpolicy::test::typed_input;

std::uint16_t half_bits(qpolicy::element type, float v) {
  return type == qpolicy::element::bf16 ? fp8::to_bf16(v) : qp::lp::to_fp16(v);
}

sample make(std::mt19937& rng, qpolicy::element type, std::int64_t rows, std::int64_t cols) {
  sample s{type, rows, cols, {}, {}};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  constexpr float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 7.0f, 448.0f, 464.0f, 0.5f, 1.5f};
  const bool f16 = type == qpolicy::element::f16;
  for (std::int64_t r = 0; r < rows; ++r) {
    const int row_mode = pick(rng);  // some rows all zero, some tiny, some huge
    for (std::int64_t c0 = 0; c0 < cols; c0 += 16) {
      const int mode = pick(rng);
      const int exponent = row_mode < 5 ? -135 + static_cast<int>(rng() % 12)   // subnormal range (f32, bf16)
                           : row_mode < 10 ? 100 + static_cast<int>(rng() % 27) // near the top of float32
                                           : static_cast<int>(rng() % 24) - 12;
      for (std::int64_t c = c0; c < std::min(cols, c0 + 16); ++c) {
        float v;
        if (row_mode >= 95 || mode < 8) v = 0.0f;
        else if (mode < 40) v = std::ldexp(ties[rng() % std::size(ties)], exponent) * ((rng() & 1) ? -1.0f : 1.0f);
        else v = std::ldexp(normal(rng), exponent);
        const int p = pick(rng);
        if (!f16 && p == 0) v = std::numeric_limits<float>::quiet_NaN();
        else if (!f16 && p == 1) v = (rng() & 1) ? INFINITY : -INFINITY;
        else if (p == 2) v = -0.0f;
        if (f16) v = std::isfinite(v) ? std::clamp(v, -60000.0f, 60000.0f) : v;
        s.full.push_back(v);
      }
    }
  }
  if (type != qpolicy::element::f32)
    for (float& v : s.full) {
      s.half.push_back(half_bits(type, v));
      v = type == qpolicy::element::bf16 ? fp8::from_bf16(s.half.back()) : fp8::from_fp16(s.half.back());
    }
  return s;
}

bool same_float(float a, float b) { return fp8::bits_of(a) == fp8::bits_of(b) || (std::isnan(a) && std::isnan(b)); }

template <class T, class Same>
void require_same(const std::vector<T>& fast, const std::vector<T>& reference, Same same, const char* what) {
  REQUIRE(fast.size() == reference.size());
  for (std::size_t i = 0; i < fast.size(); ++i) {
    if (same(fast[i], reference[i])) continue;
    INFO(what << " " << i << ": fast " << +fast[i] << ", reference " << +reference[i]);
    REQUIRE(same(fast[i], reference[i]));
  }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("CPU fast path of every low-precision formula equals its reference bit for bit",
                        "[numerics][property][low_precision]", qpolicy::test::low_precision_formulas) {
  using Formula = TestType;
  const auto& f = qp::schemes::formula_of(Formula::id);
  const auto type = GENERATE(qpolicy::element::bf16, qpolicy::element::f16, qpolicy::element::f32);
  if (f.model_dtype_only && type == qpolicy::element::f32) return;  // refused before any kernel runs
  const bool swizzled = f.block() ? GENERATE(false, true) : false;
  std::mt19937 rng(20261201u + static_cast<unsigned>(Formula::id) * 131u + static_cast<unsigned>(type) * 7u + swizzled);
  for (int round = 0; round < 25; ++round) {
    const std::int64_t rows = 1 + static_cast<std::int64_t>(rng() % (round % 5 == 0 ? 300 : 40));
    const std::int64_t cols = f.block() ? f.block() * (1 + static_cast<std::int64_t>(rng() % 9)) : 1 + static_cast<std::int64_t>(rng() % 200);
    const auto s = make(rng, type, rows, cols);
    INFO("round " << round << ": " << rows << "x" << cols << (swizzled ? ", 128x4 scales" : ""));
    lp_buffers fast(Formula::id, rows, cols, swizzled), reference(Formula::id, rows, cols, swizzled);
    fast_quantize<Formula>(s.view(), fast);
    reference_quantize<Formula>(s.view(), reference);
    require_same(fast.codes, reference.codes, [](auto a, auto b) { return a == b; }, "code byte");
    require_same(fast.block_scales, reference.block_scales, [](auto a, auto b) { return a == b; }, "block scale");
    if (f.scales == qp::schemes::scale_format::f32 || f.second == qp::schemes::second_scale::per_token)
      require_same(fast.row_scales, reference.row_scales, same_float, "row scale");
    if (f.second == qp::schemes::second_scale::per_tensor)
      require_same(fast.tensor_scale, reference.tensor_scale, same_float, "tensor scale");
  }
}
