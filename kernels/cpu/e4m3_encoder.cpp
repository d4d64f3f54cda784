#include "qpolicy/kernels/cpu/detail/e4m3_encoder.hpp"

#include "qpolicy/kernels/cpu/detail/bf16_quotient_avx512.hpp"
#include "qpolicy/kernels/cpu/detail/e4m3_avx512.hpp"

#include "qpolicy/numerics/numerics.hpp"
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>
#endif
#include "quantize_rows.hpp"

namespace qpolicy::cpu::detail {

namespace {

template <bool Multiply>
float scaled(float x, float s) {
  return Multiply ? x * s : x / s;
}

template <bool Bf16>
float element(const void* in, std::int64_t i) {
  return Bf16 ? fp8::from_bf16(static_cast<const std::uint16_t*>(in)[i]) : static_cast<const float*>(in)[i];
}

/// The scalar codes of in[first, last) with scale s; with `only_extreme`, only the lanes whose y is
/// NaN, infinite or at least 2^127 (those where a vector lane can have met a NaN).
template <bool Bf16, bool Multiply, e4m3_rule Rule>
void scalar_codes(const void* in, std::int64_t first, std::int64_t last, float s, bool only_extreme, std::uint8_t* out) {
  for (std::int64_t i = first; i < last; ++i) {
    const float y = scaled<Multiply>(element<Bf16>(in, i), s);
    if (!only_extreme || !(fp8::abs_f32(y) < 0x1p127f)) out[i] = rule_code<Rule>(y);
  }
}

/// The vector loop's factor for scale s (s or its reciprocal, as the formula has it) with F16C's
/// 2^-8 folded in: s * 2^-8 when multiplying, s * 2^8 when dividing. Exact unless that underflows or
/// overflows, which the round trip shows (then the call keeps the multiply: `false`). Scaling by a
/// power of two commutes with rounding wherever the result is normal, and y below 2^-118 or above
/// 2^120 gives the same code either way (0 with its sign, or saturation).
template <bool Multiply>
bool fold_scale(float s, float& folded) {
  folded = Multiply ? s * 0x1p-8f : s * 0x1p8f;
  return (Multiply ? folded * 0x1p8f : folded * 0x1p-8f) == s;
}

/// A segment's vector factor: its scale, with F16C's 2^-8 folded in when `Folded`.
template <bool Multiply, bool Folded>
float segment_factor(float s) {
  float f = s;
  if constexpr (Folded) fold_scale<Multiply>(s, f);
  return f;
}

/// NaN is rare and the rules differ only there: the codes of NaN lanes are set again, by the scalar
/// formula, after a vector pass saw one. So are those of quotients from 2^127 up, where a quotient by
/// a reciprocal can have overflowed into NaN (run16): x / b within 2^-23 of the largest float.
template <bool Bf16, bool Multiply, e4m3_rule Rule>
void redo_nan_codes(const void* in, std::int64_t n, std::int64_t width, const float* s, std::uint8_t* out) {
  for (std::int64_t c0 = 0, j = 0; c0 < n; c0 += width, ++j)
    scalar_codes<Bf16, Multiply, Rule>(in, c0, std::min(n, c0 + width), s[j], true, out);
}

#ifdef QPOLICY_AVX512_ENCODER
// GCC 12's intrinsic headers build some results from an "undefined" register, which the
// uninitialized-use warnings report once inlined here: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

/// x times the factor, or over it (by its reciprocal and one correction where `by_reciprocal`).
template <bool Multiply>
QPOLICY_AVX512_F16C inline __m512 scaled16(__m512 x, __m512 factor, bool by_reciprocal, const bf16_divisor16& divisor) {
  return Multiply ? _mm512_mul_ps(x, factor) : by_reciprocal ? bf16_finite_quotients16(x, divisor) : _mm512_div_ps(x, factor);
}

/// run on AVX-512 registers, 32 lanes at a time (then one group of 16): the same factor and tails.
/// bf16 values over a factor take a reciprocal and one correction (bf16_quotient_avx512.hpp), their
/// signs from the dividends; a NaN lane there may also be a quotient that overflowed, which
/// redo_nan_codes sets again too.
template <bool Bf16, bool Multiply, bool Folded, e4m3_rule Rule>
QPOLICY_AVX512_F16C void run16(const void* in, std::int64_t n, std::int64_t width, const float* s, std::uint8_t* out, const char* ahead) {
  constexpr std::int64_t bytes = Bf16 ? 2 : 4;
  __mmask16 any_nan = 0;
  for (std::int64_t c0 = 0, j = 0; c0 < n; c0 += width, ++j) {
    const std::int64_t end = std::min(n, c0 + width);
    const float f = segment_factor<Multiply, Folded>(s[j]);
    const __m512 factor = _mm512_set1_ps(f);
    const bool by_reciprocal = Bf16 && !Multiply && quotient_by_reciprocal(f);
    const bf16_divisor16 divisor = divisor16(by_reciprocal ? f : 1.0f);
    std::int64_t i = c0;
    for (; i + 32 <= end; i += 32) {
      _mm_prefetch(ahead + i * bytes, _MM_HINT_T0);
      if constexpr (!Bf16) _mm_prefetch(ahead + i * bytes + 64, _MM_HINT_T0);
      const __m512 x0 = load16<Bf16>(in, i), x1 = load16<Bf16>(in, i + 16);
      const __m512 y0 = scaled16<Multiply>(x0, factor, by_reciprocal, divisor), y1 = scaled16<Multiply>(x1, factor, by_reciprocal, divisor);
      any_nan = static_cast<__mmask16>(any_nan | _mm512_cmp_ps_mask(y0, y1, _CMP_UNORD_Q));  // a lane where either is NaN
      const __mmask32 negative = Multiply ? sign_lanes32(y0, y1) : sign_lanes32(x0, x1);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), codes_of32<Folded>(y0, y1, negative));
    }
    if (i + 16 <= end) {
      const __m512 x = load16<Bf16>(in, i), y = scaled16<Multiply>(x, factor, by_reciprocal, divisor);
      any_nan = static_cast<__mmask16>(any_nan | _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), codes_of16<Folded>(y, sign_lanes16(Multiply ? y : x)));
      i += 16;
    }
    scalar_codes<Bf16, Multiply, Rule>(in, i, end, s[j], false, out);
  }
  if (any_nan != 0) redo_nan_codes<Bf16, Multiply, Rule>(in, n, width, s, out);
}

#pragma GCC diagnostic pop
#endif

/// Whether every segment's scale folds F16C's 2^-8 exactly (fold_scale).
template <bool Multiply>
bool all_fold(std::int64_t n, std::int64_t width, const float* s) {
  float unused;
  for (std::int64_t j = 0; j * width < n; ++j)
    if (!fold_scale<Multiply>(s[j], unused)) return false;
  return true;
}

template <bool Bf16>
void dispatch(const void* in, std::int64_t n, std::int64_t width, const float* s, e4m3_formula f, std::uint8_t* out,
              const void* next) {
  if (n <= 0) return;
  width = width > 0 ? width : n;
  // Without a next run, the lines a little past this one (sequential reads keep going).
  const char* ahead = next ? static_cast<const char*>(next) : static_cast<const char*>(in) + 1024;
  // The runtime choice of formula becomes a specialization here, once per call (a row or a range).
  visit_formula(f, [&](auto rule, auto multiply) {
#ifdef QPOLICY_AVX512_ENCODER
    if (has_avx512_kernels()) {
      if (all_fold<multiply()>(n, width, s)) run16<Bf16, multiply(), true, rule()>(in, n, width, s, out, ahead);
      else run16<Bf16, multiply(), false, rule()>(in, n, width, s, out, ahead);
      return;
    }
#endif
    // Every other target: the portable encoder gives sat(y); the rule decides only NaN's code.
    const bool nan = Bf16 ? sat_codes_bf16(static_cast<const std::uint16_t*>(in), n, width, s, multiply(), out, ahead)
                          : sat_codes_f32(static_cast<const float*>(in), n, width, s, multiply(), out, ahead);
    if (nan) redo_nan_codes<Bf16, multiply(), rule()>(in, n, width, s, out);
  });
}

}  // namespace

void encode_e4m3_bf16(const std::uint16_t* in, std::int64_t n, std::int64_t width, const float* s, e4m3_formula f,
                      std::uint8_t* out, const void* next) {
  dispatch<true>(in, n, width, s, f, out, next);
}

void encode_e4m3_f32(const float* in, std::int64_t n, std::int64_t width, const float* s, e4m3_formula f, std::uint8_t* out,
                     const void* next) {
  dispatch<false>(in, n, width, s, f, out, next);
}

}  // namespace qpolicy::cpu::detail
