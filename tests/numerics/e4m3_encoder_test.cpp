// The e4m3 encoder of the code loops (kernels/cpu/e4m3_encoder.cpp) against the scalar formulas, on the
// active CPU target (meson runs it on every target the host attains): every float32 bit pattern through
// the vector path, every bf16 pattern under scales that reach each e4m3 region, NaN in any lane under
// each rule's NaN code, and every tail length.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "qpolicy/kernels/cpu/detail/bf16_quotient_avx512.hpp"
#include "qpolicy/kernels/cpu/detail/e4m3_encoder.hpp"
#include "kernels/cpu/quantize_rows.hpp"
#include "qpolicy/kernels/cpu/detail/row_ops.hpp"
#include "qpolicy/numerics/detail/quantize_blocks.hpp"
#include "qpolicy/numerics/block_formats.hpp"
#include "qpolicy/numerics/numerics.hpp"
#include "../support/test_inputs.hpp"

namespace {

using qpolicy::cpu::detail::e4m3_rule;
namespace fp8 = qpolicy::fp8;

constexpr e4m3_rule all_rules[] = {e4m3_rule::clamp_s_sat, e4m3_rule::clamp_t_tcvt, e4m3_rule::clamp_g_sat, e4m3_rule::tcvt};

std::uint8_t want_code(e4m3_rule rule, float y) {
  switch (rule) {
    case e4m3_rule::clamp_s_sat: return fp8::sat(fp8::clamp_s(y));
    case e4m3_rule::clamp_t_tcvt: return fp8::tcvt(fp8::clamp_t(y));
    case e4m3_rule::clamp_g_sat: return fp8::sat(fp8::clamp_g(y));
    case e4m3_rule::tcvt: return fp8::tcvt(y);
  }
  return 0;
}

float float_of_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

/// Mismatches of encode_e4m3_f32 over x, with the first one described in `first`.
std::int64_t f32_mismatches(const std::vector<float>& x, float s, bool multiply, e4m3_rule rule, std::string& first) {
  std::vector<std::uint8_t> got(x.size());
  qpolicy::cpu::detail::encode_e4m3_f32(x.data(), static_cast<std::int64_t>(x.size()), 0, &s, {rule, multiply}, got.data());
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint8_t want = want_code(rule, multiply ? x[i] * s : x[i] / s);
    if (got[i] != want && bad++ == 0) {
      std::uint32_t b;
      std::memcpy(&b, &x[i], sizeof b);
      char text[160];
      std::snprintf(text, sizeof text, "x bits %08x, s %a, %s, rule %d: got %02x, want %02x", b, static_cast<double>(s),
                    multiply ? "times" : "over", static_cast<int>(rule), got[i], want);
      first = text;
    }
  }
  return bad;
}

/// part(t, threads, bad, first) on up to four threads: thread t counts its mismatches in `bad` and
/// describes the first in `first`; then one check per thread.
template <class Part>
void check_on_threads(Part&& part) {
  const unsigned threads = std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
  std::vector<std::uint64_t> bad(threads, 0);
  std::vector<std::string> first(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back([&, t] { part(t, threads, bad[t], first[t]); });
  for (auto& th : pool) th.join();
  for (unsigned t = 0; t < threads; ++t) {
    INFO(first[t]);
    CHECK(bad[t] == 0);
  }
}

}  // namespace

TEST_CASE("e4m3 encoder: every float32 equals the scalar formula", "[numerics][encoder]") {
  // Every bit pattern (a stride under the sanitizers, where a full pass takes minutes), times 1 so
  // that y is x: the vector path's rounding, saturation and sign for every input. Non-NaN inputs take
  // the same vector code under every rule, so one rule covers it; NaN lanes are checked below.
#if defined(__SANITIZE_ADDRESS__)
  const std::uint64_t stride = 4093;
#else
  const std::uint64_t stride = qpolicy::test::fewer_rounds() ? 4093 : 1;  // an emulated run: every 4093rd
#endif
  constexpr std::uint64_t chunk = 1 << 22;
  check_on_threads([stride](unsigned t, unsigned threads, std::uint64_t& bad, std::string& first) {
    std::vector<float> x(chunk / stride + 1);
    for (std::uint64_t base = t * chunk; base < (1ull << 32); base += threads * chunk) {
      x.clear();
      for (std::uint64_t b = base; b < base + chunk; b += stride) x.push_back(float_of_bits(static_cast<std::uint32_t>(b)));
      bad += static_cast<std::uint64_t>(f32_mismatches(x, 1.0f, true, e4m3_rule::clamp_t_tcvt, first));
    }
  });
}

TEST_CASE("e4m3 encoder: bf16 and float32 inputs under each rule, scale, NaN and length", "[numerics][encoder]") {
  // Scales that put typical weights in each e4m3 region: subnormal codes, the 448 edge, overflow. The
  // last two cannot carry F16C's 2^-8 exactly (2^-8 times the first is below the smallest subnormal;
  // 2^8 times the second overflows), so the loop keeps its multiply for them, and that path is
  // checked on every bf16 too.
  const float scales[] = {1.0f, 0.0003f, 1.0f / 448.0f, 0x1p-20f, 3.0e5f, 1e-30f, 7.0f, 0x1p-126f, 0x1.8p-145f, 0x1p121f};
  std::vector<std::uint16_t> words(65536);
  std::vector<float> widened(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) {
    words[b] = static_cast<std::uint16_t>(b);
    widened[b] = float_of_bits(b << 16);
  }
  std::vector<std::uint8_t> got(65536);
  for (const auto rule : all_rules)
    for (const float s : scales)
      for (const bool multiply : {false, true}) {
        // Every bf16 pattern, NaN included, in runs of 16 that mix NaN with numbers.
        qpolicy::cpu::detail::encode_e4m3_bf16(words.data(), 65536, 0, &s, {rule, multiply}, got.data());
        std::int64_t bad = 0;
        for (std::uint32_t b = 0; b < 65536; ++b)
          bad += got[b] != want_code(rule, multiply ? widened[b] * s : widened[b] / s);
        INFO("bf16, rule " << static_cast<int>(rule) << ", s " << s << (multiply ? " (times)" : " (over)"));
        CHECK(bad == 0);
        std::string first;
        INFO(first);
        CHECK(f32_mismatches(widened, s, multiply, rule, first) == 0);
      }
  // Random float32 with NaN sprinkled in (any lane, any sign), every length 0-40 at every offset.
  std::mt19937 rng(11);
  std::vector<float> x(1 << 16);
  for (auto& v : x) {
    const std::uint32_t r = rng();
    v = (r & 63) == 0 ? float_of_bits((r & 0x80000000u) | 0x7FC00000u | (r >> 12 & 0x3FFFFF)) : float_of_bits(r);
  }
  for (const auto rule : all_rules) {
    std::string first;
    INFO(first);
    CHECK(f32_mismatches(x, 0.75f, false, rule, first) == 0);
  }
  std::vector<std::uint8_t> out(64);
  for (std::int64_t n = 0; n <= 40; ++n)
    for (std::int64_t at = 0; at < 3; ++at) {
      std::fill(out.begin(), out.end(), std::uint8_t{0xAA});
      const float s = 0.01f;
      qpolicy::cpu::detail::encode_e4m3_bf16(words.data() + 0x3F00 + at, n, 0, &s, {e4m3_rule::clamp_t_tcvt, false}, out.data() + at);
      bool ok = true;
      for (std::int64_t i = 0; i < 64; ++i) {
        const bool inside = i >= at && i < at + n;
        const std::uint8_t want = inside ? want_code(e4m3_rule::clamp_t_tcvt, widened[static_cast<std::size_t>(0x3F00 + i)] / 0.01f) : 0xAA;
        ok = ok && out[static_cast<std::size_t>(i)] == want;
      }
      INFO("length " << n << " at offset " << at);
      CHECK(ok);
    }
}

TEST_CASE("e4m3 encoder: a row in segments, each with its scale", "[numerics][encoder]") {
  // Every bf16 pattern as one row; segment widths with and without tails; scales drawn per segment,
  // sometimes one that cannot fold F16C's 2^-8 (the whole call then keeps the multiply); and a `next`
  // run to prefetch, which must change nothing.
  std::vector<std::uint16_t> words(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) words[b] = static_cast<std::uint16_t>(b * 40503u);  // every pattern, shuffled
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> exponent(-40.0f, 40.0f);
  for (const std::int64_t width : {std::int64_t{128}, std::int64_t{100}, std::int64_t{48}, std::int64_t{7}})
    for (const bool with_odd_scale : {false, true})
      for (const auto rule : all_rules)
        for (const bool multiply : {false, true}) {
          const std::int64_t segments = (65536 + width - 1) / width;
          std::vector<float> s(static_cast<std::size_t>(segments));
          for (auto& v : s) v = std::exp2(exponent(rng)) * (1.0f + static_cast<float>(rng() % 1000) / 1000.0f);
          if (with_odd_scale) s[static_cast<std::size_t>(segments / 2)] = multiply ? 0x1.8p-145f : 0x1p121f;
          std::vector<std::uint8_t> got(65536);
          qpolicy::cpu::detail::encode_e4m3_bf16(words.data(), 65536, width, s.data(), {rule, multiply}, got.data(), words.data() + 1);
          std::int64_t bad = 0;
          for (std::size_t i = 0; i < words.size(); ++i) {
            const float x = float_of_bits(std::uint32_t{words[i]} << 16), sj = s[i / static_cast<std::size_t>(width)];
            bad += got[i] != want_code(rule, multiply ? x * sj : x / sj);
          }
          INFO("width " << width << ", rule " << static_cast<int>(rule) << (multiply ? " (times)" : " (over)")
                        << (with_odd_scale ? ", one scale that does not fold" : ""));
          CHECK(bad == 0);
        }
}

#ifdef QPOLICY_BF16_QUOTIENT
namespace {
// GCC 12's intrinsic headers build some results from an "undefined" register: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
/// Pairs (x, b), x = 1 + i / 128 (every bf16 significand, both signs), b = 1 + j 2^-23 for j in
/// [first, last), where bf16_quotients16 differs from vdivps; the first one in `where`.
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) std::uint64_t quotient_mismatches(std::uint32_t first, std::uint32_t last,
                                                                                          std::string& where) {
  std::uint64_t bad = 0;
  alignas(64) float x[16];
  for (int i = 0; i < 16; ++i) x[i] = 1.0f + static_cast<float>(i) / 128.0f;
  for (std::uint32_t j = first; j < last; ++j) {
    const float b = float_of_bits(0x3F800000u | j);
    const auto d = qpolicy::cpu::detail::divisor16(b);
    for (int i0 = 0; i0 < 128; i0 += 16) {
      const __m512 xv = _mm512_add_ps(_mm512_load_ps(x), _mm512_set1_ps(static_cast<float>(i0) / 128.0f));
      for (const __m512 signed_x : {xv, _mm512_sub_ps(_mm512_setzero_ps(), xv)}) {
        const __mmask16 differ = _mm512_cmpneq_epi32_mask(_mm512_castps_si512(qpolicy::cpu::detail::bf16_quotients16(signed_x, d)),
                                                          _mm512_castps_si512(_mm512_div_ps(signed_x, d.b)));
        if (differ && bad++ == 0) where = "b bits " + std::to_string(0x3F800000u | j) + ", x = 1 + " + std::to_string(i0) + "/128 + lane";
        bad += static_cast<std::uint64_t>(__builtin_popcount(differ)) - (differ ? 1 : 0);
      }
    }
  }
  return bad;
}

/// bf16_quotients16's quotient of x by b (lane 0).
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) float quotient_of(float x, float b) {
  alignas(64) float got[16];
  _mm512_store_ps(got, qpolicy::cpu::detail::bf16_quotients16(_mm512_set1_ps(x), qpolicy::cpu::detail::divisor16(b)));
  return got[0];
}
#pragma GCC diagnostic pop
}  // namespace

TEST_CASE("bf16 quotients by a reciprocal and one correction equal x / b: every pair of significands", "[numerics][encoder]") {
  if (!__builtin_cpu_supports("avx512f")) {
    WARN("skipped: this machine lacks AVX-512 (the quantizers divide there)");
    return;
  }
  // 2^23 divisor significands times 128 bf16 ones, both signs: the whole claim, since powers of two
  // scale every step exactly in the range the quantizers use it (bf16_quotient_avx512.hpp). A stride
  // under the sanitizers, where a full pass takes minutes.
#if defined(__SANITIZE_ADDRESS__)
  constexpr std::uint32_t stride = 97;
#else
  constexpr std::uint32_t stride = 1;
#endif
  constexpr std::uint32_t significands = 1u << 23, chunk = 1u << 12;
  check_on_threads([](unsigned t, unsigned threads, std::uint64_t& bad, std::string& first) {
    for (std::uint32_t j = t * chunk; j < significands; j += threads * chunk)
      for (std::uint32_t i = j; i < j + chunk; i += stride) bad += quotient_mismatches(i, i + 1, first);
  });
  // The edges: zeros keep their sign, infinities and NaN pass through, and quotients that overflow.
  const float edges[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 3.0e38f, -3.0e38f, 0x1p-133f, -0x1p-126f};
  for (const float b : {0x1p-50f, 0.0003f, 1.0f / 448.0f, 7.0f, 0x1p60f})
    for (const float x : edges) {
      const float got = quotient_of(x, b), want = x / b;
      INFO("x " << x << ", b " << b << ": got " << got << ", want " << want);
      if (want != want) CHECK(got != got);
      else CHECK((got == want && std::signbit(got) == std::signbit(want)));
    }
}
#endif

TEST_CASE("widening: every bf16 and fp16 pattern is its float32 value", "[numerics][encoder]") {
  // The quantizers' rows start here; fp16 infinity and NaN too, with their payloads, at every offset
  // of a vector (odd lengths leave a tail).
  std::vector<std::uint16_t> words(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) words[b] = static_cast<std::uint16_t>(b);
  for (const auto type : {qpolicy::element::bf16, qpolicy::element::f16}) {
    for (const std::int64_t first : {0, 1, 7}) {
      const std::int64_t n = 65536 - first - 3;
      std::vector<float> out(static_cast<std::size_t>(n));
      qpolicy::cpu::detail::widen({words.data(), type, 1, 65536}, first, n, out.data());
      std::int64_t bad = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::uint16_t w = words[static_cast<std::size_t>(first + i)];
        const float want = type == qpolicy::element::bf16 ? fp8::from_bf16(w) : fp8::from_fp16(w);
        bad += fp8::bits_of(out[static_cast<std::size_t>(i)]) != fp8::bits_of(want);
      }
      INFO((type == qpolicy::element::bf16 ? "bf16" : "fp16") << " from element " << first);
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("E8M0 block scales: every rule's byte and multiplier equal the scalar formulas", "[numerics][encoder]") {
  // NaN-ignoring amax bits from zero through the subnormals, every binade and infinity (a stride of
  // 4093 plus each binade's edges), in runs that leave vector tails; MXFP8's torch path also with a NaN
  // in the block (`widest`).
  std::vector<std::uint32_t> amax, widest;
  for (std::uint64_t u = 0; u <= 0x7F800000u; u += 4093) amax.push_back(static_cast<std::uint32_t>(u));
  for (std::uint32_t e = 0; e <= 255; ++e)
    for (const std::uint32_t m : {0u, 1u, 0x1FFFFFu, 0x200000u, 0x3FFFFFu, 0x400000u, 0x400001u, 0x7FFFFFu})
      if ((e << 23 | m) <= 0x7F800000u) amax.push_back(e << 23 | m);
  amax.push_back(0x00800000u);
  for (std::size_t i = 0; i < amax.size(); ++i) widest.push_back(i % 7 == 3 ? 0x7FC00000u : amax[i]);
  const auto n = static_cast<std::int64_t>(amax.size()) - 5;
  std::vector<std::uint8_t> bytes(amax.size());
  std::vector<float> multipliers(amax.size());
  using qpolicy::cpu::detail::e8m0_scales;
  for (const auto kind : {e8m0_scales::mxfp8_torch, e8m0_scales::mxfp8_flashinfer, e8m0_scales::mxfp4_even, e8m0_scales::mxfp4_rceil}) {
    qpolicy::cpu::detail::e8m0_block_scales(amax.data(), widest.data(), n, kind, bytes.data(), multipliers.data());
    std::int64_t bad = 0;
    std::string first;
    for (std::int64_t j = 0; j < n; ++j) {
      const float a = fp8::float_of(amax[j]);
      std::uint8_t b = 0;
      float m = 0.0f;
      const auto reciprocal = [](std::uint8_t byte) { return fp8::float_of(byte == 254 ? 0x00400000u : (254u - byte) << 23); };
      switch (kind) {
        case e8m0_scales::mxfp8_torch: {
          const bool nan = widest[j] > 0x7F800000u;
          const float tiny = fp8::float_of(0x00800000u), clamped = a > tiny ? a : tiny;
          b = nan ? 0 : qpolicy::lp::e8m0_ceil(clamped / fp8::max_e4m3);
          m = nan ? fp8::float_of(0x7FC00000u) : reciprocal(b);
          break;
        }
        case e8m0_scales::mxfp8_flashinfer:
          b = qpolicy::lp::e8m0_round_up(a * fp8::float_of(fp8::inv_448_bits));
          m = qpolicy::lp::flashinfer_inverse(b);
          break;
        case e8m0_scales::mxfp4_even:
          b = qpolicy::lp::e8m0_even(a);
          m = reciprocal(b);
          break;
        case e8m0_scales::mxfp4_rceil:
          b = qpolicy::lp::e8m0_round_up(a * fp8::float_of(0x3E2AAAABu));
          m = qpolicy::lp::flashinfer_inverse(b);
          break;
      }
      if ((bytes[j] != b || fp8::bits_of(multipliers[j]) != fp8::bits_of(m)) && bad++ == 0)
        first = "amax bits " + std::to_string(amax[j]) + ": byte " + std::to_string(bytes[j]) + " want " + std::to_string(b);
    }
    INFO("rule " << static_cast<int>(kind) << ": " << first);
    CHECK(bad == 0);
  }
}
