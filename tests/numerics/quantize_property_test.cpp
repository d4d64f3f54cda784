// Property tests: the CPU fast path of every formula of the registry (cpu::quantize<F>: threads, the
// shared per-element and block arithmetic) equals its reference (cpu::reference::quantize<F>) bit for
// bit, on random shapes (odd sizes, one row, one column) and on the values the specs single out: zeros,
// outliers, NaN and infinity where the input type has them, +-448 and rounding ties for the FP8 rows;
// zero, subnormal-range and huge blocks, e2m1 ties, amax at the EVEN and e4m3 boundaries and negative
// zeros for the low-precision rows; bf16, fp16 and (where the formula takes it) fp32 inputs; every
// option the row takes (UE8M0, the group layouts, the 128x4 block scales).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../support/random_operands.hpp"
#include "../support/test_inputs.hpp"
#include "../support/type_lists.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/kernels/cpu/reference.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"
#include "qpolicy/numerics/block_formats.hpp"

namespace qp = qpolicy;
namespace fp8 = qpolicy::fp8;
namespace ref = qpolicy::cpu::reference;

namespace {

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

/// FP8 rows: normal values at a random binade with NaN, infinity, outliers, +-448, the tie above it and a
/// rounding tie mixed in, and zero rows.
sample fp8_sample(std::mt19937& rng, qpolicy::element type, std::int64_t rows, std::int64_t cols) {
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

std::uint16_t half_bits(qpolicy::element type, float v) {
  return type == qpolicy::element::bf16 ? fp8::to_bf16(v) : qp::lp::to_fp16(v);
}

/// Low-precision rows: blocks drawn from a few regimes so that every edge of every formula occurs.
sample block_sample(std::mt19937& rng, qpolicy::element type, std::int64_t rows, std::int64_t cols) {
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
/// e4m3fn NaN codes may differ in sign between the paths (the FP8 formulas' NaN is not specified further).
bool same_code(std::uint8_t a, std::uint8_t b) { return a == b || ((a & 0x7F) == 0x7F && (b & 0x7F) == 0x7F); }

/// One part's bytes, the fast path's against the reference's: float32 parts value by value (NaN is
/// NaN), codes byte by byte (FP8 codes up to NaN's sign), byte scales exactly.
void require_same(const qp::stored_part& fast, const std::vector<std::uint8_t>& reference, bool fp8_codes) {
  REQUIRE(fast.bytes.size() == reference.size());
  for (std::size_t i = 0; i < reference.size(); i += fast.type == qp::dtype::f32 ? 4 : 1) {
    bool same;
    if (fast.type == qp::dtype::f32) {
      float a, b;
      std::memcpy(&a, fast.bytes.data() + i, 4);
      std::memcpy(&b, reference.data() + i, 4);
      same = same_float(a, b);
    } else {
      same = fp8_codes ? same_code(fast.bytes[i], reference[i]) : fast.bytes[i] == reference[i];
    }
    if (same) continue;
    INFO("part '" << fast.suffix << "' byte " << i << ": fast " << +fast.bytes[i] << ", reference " << +reference[i]);
    REQUIRE(same);
  }
}

/// Formula's fast path on s against its reference, every part byte for byte (require_same). Both
/// paths' buffers start as different patterns, so a byte either leaves unwritten differs (the 128x4
/// layout's padding excepted: zero in both, as the kernels' callers leave it).
template <class Formula>
void require_fast_equals_reference(const sample& s, const qp::tensor_quant_options& o) {
  const auto& f = qp::schemes::formula_of(Formula::id);
  std::vector<qp::stored_part> fast;
  qp::quantize_tensor_parts_into(Formula::id, s.view(), o, fast);
  for (auto& part : fast) std::fill(part.bytes.begin(), part.bytes.end(), std::uint8_t{0xA5});
  qp::quantize_tensor_parts_into(Formula::id, s.view(), o, fast);
  std::vector<std::vector<std::uint8_t>> reference;
  for (std::size_t p = 0; p < fast.size(); ++p)
    reference.emplace_back(fast[p].bytes.size(), p == 1 && o.swizzled ? std::uint8_t{0} : std::uint8_t{0x5A});
  const bool codebook = f.second == qp::schemes::second_scale::codebook;
  ref::quantize<Formula>(s.view(), {reference[0].data(), reference[1].data(),
                                    reference.size() > 2 && !codebook ? reinterpret_cast<float*>(reference[2].data()) : nullptr,
                                    codebook ? reference[2].data() : nullptr},
                         {o.ue8m0, o.layout, o.swizzled});
  for (std::size_t p = 0; p < fast.size(); ++p) require_same(fast[p], reference[p], p == 0 && !f.low_precision());
}

/// The options a formula's row takes, drawn per test run.
template <class Formula>
qp::tensor_quant_options options_for() {
  const auto& f = qp::schemes::formula_of(Formula::id);
  qp::tensor_quant_options o;
  o.threads = 3;
  if (f.options == qp::schemes::scale_options::fp8 && (f.k_multiple > 1 || f.group.row > 1)) o.ue8m0 = GENERATE(false, true);
  if (f.k_multiple > 1 && !f.low_precision())
    o.layout = GENERATE(fp8::scale_layout::row_major, fp8::scale_layout::column_major, fp8::scale_layout::column_major_tma);
  if (f.options == qp::schemes::scale_options::byte_blocks && !f.tiled()) o.swizzled = GENERATE(false, true);
  return o;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("every formula's CPU fast path equals its reference bit for bit", "[numerics][property]",
                        qpolicy::test::all_formulas) {
  using Formula = TestType;
  const auto& f = qp::schemes::formula_of(Formula::id);
  const auto o = options_for<Formula>();
  const auto type = GENERATE(qpolicy::element::bf16, qpolicy::element::f16, qpolicy::element::f32);
  if (f.model_dtype_only && type == qpolicy::element::f32) return;  // refused before any kernel runs
  const bool lp = f.low_precision();
  std::mt19937 rng(20261203u + static_cast<unsigned>(Formula::id) * 131u + static_cast<unsigned>(type) * 7u + o.swizzled);
  const int rounds = qpolicy::test::property_rounds(24);
  for (int round = 0; round < rounds; ++round) {
    // Rows: up to 300 (the low-precision rows mostly up to 40); K: whole groups or blocks where the row
    // needs them, else any width, one column now and then.
    // Once a very wide low-precision row, a few rows of it: the row kernels work in passes of up to 1024
    // blocks (NVFP4 per token reads its amax off the first pass's maxima when the row fits in one).
    const bool very_wide = lp && round == rounds / 2 - 1 + (rounds == 1);
    const std::int64_t drawn = very_wide ? 1 + static_cast<std::int64_t>(rng() % 3) : 1 + static_cast<std::int64_t>(rng() % (lp && round % 5 ? 40 : 300));
    const std::int64_t rows = (drawn + f.tile_rows - 1) / f.tile_rows * f.tile_rows;  // whole tiles (LUT-B: 8 rows)
    const std::int64_t unit = f.k_multiple;
    // Now and then wide low-precision rows: the row kernels work 16 blocks at a time, then the rest.
    const std::int64_t units = lp && round % 6 == 1 ? 40 : lp ? 9 : 6;
    const std::int64_t cols = very_wide  ? unit * (1100 + static_cast<std::int64_t>(rng() % 1000))
                              : unit > 1 ? unit * (1 + static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(units)))
                              : round % 7 == 0 ? 1
                                               : 1 + static_cast<std::int64_t>(rng() % (lp ? 200 : 700));
    const auto s = lp ? block_sample(rng, type, rows, cols) : fp8_sample(rng, type, rows, cols);
    INFO("round " << round << ": " << rows << "x" << cols << (o.swizzled ? ", 128x4 scales" : "") << (o.ue8m0 ? ", UE8M0" : ""));
    require_fast_equals_reference<Formula>(s, o);
  }
}

TEMPLATE_LIST_TEST_CASE("every formula's fast path equals its reference on finite bf16 rows, the common case", "[numerics][property]",
                        qpolicy::test::all_formulas) {
  // Rows without NaN or infinity take the kernels' shortest paths (their amax passes see no NaN, their
  // quotients cannot overflow), which rows sprinkled with NaN rarely reach: wide rows of normal values,
  // each row at its own magnitude, with zeros now and then.
  using Formula = TestType;
  const auto& f = qp::schemes::formula_of(Formula::id);
  const auto o = options_for<Formula>();
  std::mt19937 rng(20261206u + static_cast<unsigned>(Formula::id) * 17u + o.swizzled);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int round = 0; round < 4; ++round) {
    const std::int64_t rows = (1 + static_cast<std::int64_t>(rng() % 24) + f.tile_rows - 1) / f.tile_rows * f.tile_rows;
    const std::int64_t most = f.tiled() ? 2600 : 1100, unit = f.k_multiple;  // LUT-B: up to 40 tiles, fitted 16 at a time
    const std::int64_t cols = (1 + static_cast<std::int64_t>(rng() % most) + unit - 1) / unit * unit;
    sample s{qpolicy::element::bf16, rows, cols, {}, {}};
    for (std::int64_t r = 0; r < rows; ++r) {
      const float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
      for (std::int64_t c = 0; c < cols; ++c) {
        s.half.push_back(to_bf16(rng() % 50 == 0 ? 0.0f : normal(rng) * magnitude));
        s.full.push_back(fp8::from_bf16(s.half.back()));
      }
    }
    INFO("round " << round << ": " << rows << "x" << cols << (o.swizzled ? ", 128x4 scales" : "") << (o.ue8m0 ? ", UE8M0" : ""));
    require_fast_equals_reference<Formula>(s, o);
  }
}

TEST_CASE("the FP8 block kernels' torch.compile variant equals its reference bit for bit", "[numerics][property]") {
  const auto type = GENERATE(qpolicy::element::bf16, qpolicy::element::f16, qpolicy::element::f32);
  const bool ue8m0 = GENERATE(false, true);
  std::mt19937 rng(20261130u + static_cast<unsigned>(type));
  for (int round = 0; round < 10; ++round) {
    const std::int64_t rows = 1 + static_cast<std::int64_t>(rng() % 300), cols = 1 + static_cast<std::int64_t>(rng() % 700);
    const auto s = fp8_sample(rng, type, rows, cols);
    const auto scales = static_cast<std::size_t>(((rows + 127) / 128) * ((cols + 127) / 128));
    std::vector<std::uint8_t> qf(static_cast<std::size_t>(rows * cols)), qr(qf.size());
    std::vector<float> sf(scales, -1.0f), sr(scales, -2.0f);
    const fp8::block_options blocks{ue8m0, true};
    qpolicy::cpu::weight_kernel<qp::fp8_per_block>::run(s.view(), blocks, qf.data(), sf.data(), {3});
    ref::block_128x128(s.view(), blocks, qr.data(), sr.data());
    for (std::size_t i = 0; i < qf.size(); ++i) REQUIRE(same_code(qf[i], qr[i]));
    for (std::size_t i = 0; i < sf.size(); ++i) REQUIRE(same_float(sf[i], sr[i]));
  }
}
