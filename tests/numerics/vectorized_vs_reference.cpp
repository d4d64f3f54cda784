// Property tests: the vectorized CPU kernels (threads, one per FP8 formula of the registry) equal the reference bit
// for bit on random shapes (odd sizes, one row, one column), zeros, outliers, NaN and infinity, values
// at +-448 and at rounding ties, for bf16, fp16 and fp32 inputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../support/random_operands.hpp"
#include "../support/type_lists.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"

namespace qp = qpolicy;
namespace fp8 = qpolicy::fp8;
namespace ref = qpolicy::cpu::reference;

namespace {

// Random inputs of a given element type, with the special values the spec singles out.
using sample = qpolicy::test::typed_input;

std::uint16_t to_bf16(float f) {  // truncation is fine: any bf16 pattern is a valid input
  return static_cast<std::uint16_t>(fp8::bits_of(f) >> 16);
}
std::uint16_t to_fp16(float f) {
  // Only values fp16 represents are generated: encode them exactly.
  if (std::isnan(f)) return 0x7E00;
  if (std::isinf(f)) return f > 0 ? 0x7C00 : 0xFC00;
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  f = std::fabs(f);
  if (f == 0) return sign;
  int e;
  const float m = std::frexp(f, &e);  // f = m * 2^e, m in [0.5, 1)
  if (e < -13) return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::lround(f * 16777216.0f)));
  return static_cast<std::uint16_t>(sign | ((e + 14) << 10) | (static_cast<int>(std::lround(m * 2048)) & 0x3FF));
}

sample make(std::mt19937& rng, qpolicy::element type, std::int64_t rows, std::int64_t cols) {
  sample s{type, rows, cols, {}, {}};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
  const bool zero_row_mode = pick(rng) < 20;
  for (std::int64_t r = 0; r < rows; ++r) {
    const bool zero_row = zero_row_mode && pick(rng) < 30;
    for (std::int64_t c = 0; c < cols; ++c) {
      float v = zero_row ? 0.0f : normal(rng) * scale;
      const int p = pick(rng);
      if (type != qpolicy::element::f16) {
        if (p == 0) v = std::numeric_limits<float>::quiet_NaN();
        else if (p == 1) v = (rng() & 1) ? INFINITY : -INFINITY;
      }
      if (p == 2) v *= 1e4f;                                // outlier
      else if (p == 3) v = (rng() & 1) ? 448.0f : -448.0f;  // the e4m3fn maximum
      else if (p == 4) v = 464.0f;                          // ties down to 448
      else if (p == 5) v = 0.53125f * scale;                // a rounding tie at scale 1
      else if (p == 6) v = -0.0f;
      if (type == qpolicy::element::f16) v = std::clamp(v, -60000.0f, 60000.0f);
      s.full.push_back(v);
    }
  }
  if (type == qpolicy::element::bf16)
    for (float v : s.full) s.half.push_back(to_bf16(v));
  if (type == qpolicy::element::f16)
    for (float v : s.full) s.half.push_back(to_fp16(v));
  return s;
}

bool same_float(float a, float b) { return fp8::bits_of(a) == fp8::bits_of(b) || (std::isnan(a) && std::isnan(b)); }
bool same_code(std::uint8_t a, std::uint8_t b) { return a == b || ((a & 0x7F) == 0x7F && (b & 0x7F) == 0x7F); }

template <class T, class Same>
void require_same(const std::vector<T>& fast, const std::vector<T>& reference, Same same) {
  REQUIRE(fast.size() == reference.size());
  for (std::size_t i = 0; i < fast.size(); ++i) {
    if (same(fast[i], reference[i])) continue;
    INFO("index " << i);
    REQUIRE(same(fast[i], reference[i]));
  }
}

}  // namespace

namespace {
/// The options a formula reads, drawn per test run: UE8M0 for 128x128 blocks (and the torch.compile
/// variant, through the block kernels), every layout and UE8M0 for 1xG groups; nothing for the others.
struct drawn_options {
  qpolicy::quantize_options kernel;
  bool compiled_variant = false;
};
template <class Formula>
drawn_options options_for() {
  drawn_options o;
  const auto& f = qp::schemes::formula_of(Formula::id);
  if (f.weight && f.group.row > 1) {
    o.kernel.ue8m0 = GENERATE(false, true);
    o.compiled_variant = GENERATE(false, true);
  }
  if (f.k_multiple > 1) {
    o.kernel.ue8m0 = GENERATE(false, true);
    o.kernel.layout = GENERATE(fp8::scale_layout::row_major, fp8::scale_layout::column_major, fp8::scale_layout::column_major_tma);
  }
  return o;
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("CPU vectorized kernels equal the reference bit for bit", "[numerics][property]",
                        qpolicy::test::fp8_formulas) {
  using Formula = TestType;
  const auto o = options_for<Formula>();
  const auto type = GENERATE(qpolicy::element::bf16, qpolicy::element::f16, qpolicy::element::f32);
  const auto& f = qp::schemes::formula_of(Formula::id);
  const std::int64_t group = f.k_multiple;
  std::mt19937 rng(20261130 + static_cast<unsigned>(Formula::id) * 31 + static_cast<unsigned>(type));
  for (int round = 0; round < 20; ++round) {
    const std::int64_t rows = 1 + static_cast<std::int64_t>(rng() % 300);
    // K: one column now and then, else up to 700; 1xG groups take whole groups.
    const std::int64_t cols = group > 1 ? group * (1 + static_cast<std::int64_t>(rng() % 6))
                              : round % 7 == 0 ? 1
                                               : 1 + static_cast<std::int64_t>(rng() % 700);
    const auto s = make(rng, type, rows, cols);
    INFO("round " << round << ": " << rows << "x" << cols);
    const auto grid = qp::schemes::scale_grid(f.group, rows, cols);
    const auto scales = static_cast<std::size_t>(group > 1 ? fp8::scale_storage(o.kernel.layout, rows, cols / group)
                                                           : grid[0] * grid[1]);
    const auto n = static_cast<std::size_t>(rows * cols);
    std::vector<std::uint8_t> qf(n), qr(n);
    std::vector<float> sf(scales, -1.0f), sr(scales, -2.0f);
    if (o.compiled_variant) {
      const fp8::block_options blocks{o.kernel.ue8m0, true};
      qpolicy::cpu::weight_kernel<qp::fp8_per_block>::run(s.view(), blocks, qf.data(), sf.data(), {3});
      ref::block_128x128(s.view(), blocks, qr.data(), sr.data());
    } else {
      qpolicy::cpu::quantize<Formula>(s.view(), {qf.data(), sf.data(), nullptr}, o.kernel, {3});
      ref::quantize<Formula>(s.view(), {qr.data(), sr.data(), nullptr}, o.kernel);
    }
    require_same(qf, qr, same_code);
    require_same(sf, sr, same_float);
  }
}
