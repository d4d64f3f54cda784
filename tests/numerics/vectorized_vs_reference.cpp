// Property tests: the CPU fast path (threads, per-scheme specializations) equals the reference bit
// for bit on random shapes (odd sizes, one row, one column), zeros, outliers, NaN and infinity, values
// at +-448 and at rounding ties, for bf16, fp16 and fp32 inputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/vectorized.hpp"

namespace qp = qpolicy;
namespace fp8 = qpolicy::fp8;
namespace ref = qpolicy::cpu::reference;
using qpolicy::cpu::activation_kernel;
using qpolicy::cpu::weight_kernel;

namespace {

/// A random input of a given element type, with the special values the spec singles out.
struct sample {
  fp8::element type;
  std::int64_t rows, cols;
  std::vector<std::uint16_t> half;
  std::vector<float> full;
  fp8::input_view view() const {
    return {type == fp8::element::f32 ? static_cast<const void*>(full.data()) : half.data(), type, rows, cols};
  }
};

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

sample make(std::mt19937& rng, fp8::element type, std::int64_t rows, std::int64_t cols) {
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
      if (type != fp8::element::f16) {
        if (p == 0) v = std::numeric_limits<float>::quiet_NaN();
        else if (p == 1) v = (rng() & 1) ? INFINITY : -INFINITY;
      }
      if (p == 2) v *= 1e4f;                                // outlier
      else if (p == 3) v = (rng() & 1) ? 448.0f : -448.0f;  // the e4m3fn maximum
      else if (p == 4) v = 464.0f;                          // ties down to 448
      else if (p == 5) v = 0.53125f * scale;                // a rounding tie at scale 1
      else if (p == 6) v = -0.0f;
      if (type == fp8::element::f16) v = std::clamp(v, -60000.0f, 60000.0f);
      s.full.push_back(v);
    }
  }
  if (type == fp8::element::bf16)
    for (float v : s.full) s.half.push_back(to_bf16(v));
  if (type == fp8::element::f16)
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

TEST_CASE("CPU fast path equals the reference bit for bit", "[numerics][property]") {
  std::mt19937 rng(20261130);
  const qpolicy::cpu::cpu_options threads{3};
  for (int round = 0; round < 60; ++round) {
    const auto type = static_cast<fp8::element>(round % 3);
    const std::int64_t rows = 1 + static_cast<std::int64_t>(rng() % 300);
    const std::int64_t cols = round % 7 == 0 ? 1 : 1 + static_cast<std::int64_t>(rng() % 700);
    const auto s = make(rng, type, rows, cols);
    const auto x = s.view();
    INFO("round " << round << ": " << rows << "x" << cols << " type " << int(type));
    const auto n = static_cast<std::size_t>(rows * cols);
    std::vector<std::uint8_t> qf(n), qr(n);
    std::vector<float> sf(static_cast<std::size_t>(rows)), sr(sf.size());

    weight_kernel<qp::fp8_per_tensor>::run(x, qf.data(), sf.data(), threads);
    ref::weight_per_tensor(x, qr.data(), sr.data());
    require_same(qf, qr, same_code);
    CHECK(same_float(sf[0], sr[0]));

    weight_kernel<qp::fp8_per_channel>::run(x, qf.data(), sf.data(), threads);
    ref::weight_per_channel(x, qr.data(), sr.data());
    require_same(qf, qr, same_code);
    require_same(sf, sr, same_float);

    activation_kernel<qp::fp8_per_token>::run(x, qf.data(), sf.data(), threads);
    ref::dynamic_per_token(x, qr.data(), sr.data());
    require_same(qf, qr, same_code);
    require_same(sf, sr, same_float);

    activation_kernel<qp::fp8_per_tensor_dynamic>::run(x, qf.data(), sf.data(), threads);
    ref::dynamic_per_tensor(x, qr.data(), sr.data());
    require_same(qf, qr, same_code);
    CHECK(same_float(sf[0], sr[0]));

    for (bool variant : {false, true}) {
      const ref::block_options o{round % 2 == 1, variant};
      const auto blocks = static_cast<std::size_t>(((rows + 127) / 128) * ((cols + 127) / 128));
      std::vector<float> bf(blocks), br(blocks);
      weight_kernel<qp::fp8_per_block>::run(x, o, qf.data(), bf.data(), threads);
      ref::block_128x128(x, o, qr.data(), br.data());
      require_same(qf, qr, same_code);
      require_same(bf, br, same_float);
    }
  }
}

TEST_CASE("CPU fast 1x128 groups equal the reference in every layout", "[numerics][property]") {
  std::mt19937 rng(7);
  for (int round = 0; round < 30; ++round) {
    const auto type = static_cast<fp8::element>(round % 3);
    const std::int64_t rows = 1 + static_cast<std::int64_t>(rng() % 77), cols = 128 * (1 + static_cast<std::int64_t>(rng() % 6));
    const auto s = make(rng, type, rows, cols);
    for (auto layout : {fp8::scale_layout::row_major, fp8::scale_layout::column_major, fp8::scale_layout::column_major_tma}) {
      const ref::group_options o{128, round % 2 == 0, layout};
      const auto n = static_cast<std::size_t>(rows * cols);
      const auto scales = static_cast<std::size_t>(fp8::scale_storage(layout, rows, cols / 128));
      std::vector<std::uint8_t> qf(n), qr(n);
      std::vector<float> sf(scales, -1.0f), sr(scales, -2.0f);
      activation_kernel<qp::fp8_per_block_dynamic>::run(s.view(), o, qf.data(), sf.data(), {4});
      ref::per_token_group(s.view(), o, qr.data(), sr.data());
      INFO("round " << round << " layout " << int(layout));
      require_same(qf, qr, same_code);
      require_same(sf, sr, same_float);
    }
  }
}
