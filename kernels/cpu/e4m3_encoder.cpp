#include "qpolicy/kernels/cpu/detail/e4m3_encoder.hpp"

#include "qpolicy/numerics/numerics.hpp"
#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define QP_F16C_ENCODER 1
#endif

namespace qpolicy::cpu::detail {

namespace {

/// The scalar formula of `rule` (the tail of a run and any 16 lanes holding a NaN).
template <e4m3_rule Rule>
std::uint8_t scalar_code(float y) {
  using namespace fp8;
  if constexpr (Rule == e4m3_rule::clamp_s_sat) return sat(clamp_s(y));
  else if constexpr (Rule == e4m3_rule::clamp_t_tcvt) return tcvt(clamp_t(y));
  else if constexpr (Rule == e4m3_rule::clamp_g_sat) return sat(clamp_g(y));
  else return tcvt(y);
}

template <bool Multiply>
float scaled(float x, float s) {
  return Multiply ? x * s : x / s;
}

#ifdef QP_F16C_ENCODER
#define QP_F16C __attribute__((target("avx,f16c")))

/// The encoder's constants, made once per call.
struct encoder_constants {
  __m256 sign_bit, exponent, max_e4m3, min_normal, to_c, to_half;
  __m128i negative_offset;  // 384: 256 + 128
};

QP_F16C inline encoder_constants make_constants() {
  return {_mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u))), _mm256_castsi256_ps(_mm256_set1_epi32(0x7F800000)),
          _mm256_set1_ps(448.0f), _mm256_set1_ps(0x1p-6f), _mm256_set1_ps(0x1p20f), _mm256_set1_ps(0x1p-8f),
          _mm_set1_epi16(384)};
}

// Eight codes of y (16-bit lanes, each the code as a signed byte) under every rule: saturating
// round-to-nearest-even; a NaN lane's code is wrong here, and the caller sets it again.
// |y| is capped at 448 (all of (448, 464] rounds to 448 and the rest saturates there anyway). With E
// the binade of a = |y| (at least 2^-6, e4m3's smallest normal), a + 2^(E+20) lies in the binade of
// c = 2^(E+20), whose ulp 2^(E-3) is e4m3's step at a: the addition rounds a to e4m3 (ties to even)
// and subtracting c again is exact. That value times 2^-8 is a float16 exactly (e4m3 spans 2^-9 to
// 448; f16's subnormal step is 2^-24), and the float16 bits >> 7 are the e4m3 code: the exponent
// field lines up (bias 15 against 7, shifted by 8) and subnormals map to subnormals.
QP_F16C inline __m128i codes_of(__m256 y, const encoder_constants& k) {
  const __m256 sign = _mm256_and_ps(y, k.sign_bit);
  const __m256 a = _mm256_min_ps(_mm256_andnot_ps(k.sign_bit, y), k.max_e4m3);
  const __m256 c = _mm256_mul_ps(_mm256_max_ps(_mm256_and_ps(a, k.exponent), k.min_normal), k.to_c);
  const __m256 rounded = _mm256_sub_ps(_mm256_add_ps(a, c), c);
  const __m128i half = _mm256_cvtps_ph(_mm256_or_ps(_mm256_mul_ps(rounded, k.to_half), sign), _MM_FROUND_TO_NEAREST_INT);
  // half >> 7 is the code's magnitude, plus 256 when negative; less 384 there, it is the code as a
  // signed byte (code - 128), which the caller's signed saturating pack keeps.
  const __m128i negative = _mm_srai_epi16(half, 15);
  return _mm_sub_epi16(_mm_srli_epi16(half, 7), _mm_and_si128(negative, k.negative_offset));
}

template <bool Bf16>
QP_F16C inline __m256 load8(const void* in, std::int64_t i) {
  if constexpr (Bf16) {
    const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const std::uint16_t*>(in) + i));
    const __m128i zero = _mm_setzero_si128();
    const __m256i wide = _mm256_insertf128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(zero, w)), _mm_unpackhi_epi16(zero, w), 1);
    return _mm256_castsi256_ps(wide);  // a bf16 is the top half of its float
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(in) + i);
  }
}

template <bool Bf16>
float element(const void* in, std::int64_t i) {
  return Bf16 ? fp8::from_bf16(static_cast<const std::uint16_t*>(in)[i]) : static_cast<const float*>(in)[i];
}

template <bool Bf16, bool Multiply, e4m3_rule Rule>
QP_F16C void run(const void* in, std::int64_t n, float s, std::uint8_t* out) {
  const __m256 factor = _mm256_set1_ps(s);
  const encoder_constants k = make_constants();
  __m256 any_nan = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 x0 = load8<Bf16>(in, i), x1 = load8<Bf16>(in, i + 8);
    const __m256 y0 = Multiply ? _mm256_mul_ps(x0, factor) : _mm256_div_ps(x0, factor);
    const __m256 y1 = Multiply ? _mm256_mul_ps(x1, factor) : _mm256_div_ps(x1, factor);
    any_nan = _mm256_or_ps(any_nan, _mm256_cmp_ps(y0, y1, _CMP_UNORD_Q));  // a lane where either is NaN
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_packs_epi16(codes_of(y0, k), codes_of(y1, k)));
  }
  // NaN is rare and the rules differ only there: its codes are set again, by the scalar formula.
  if (_mm256_movemask_ps(any_nan) != 0)
    for (std::int64_t j = 0; j < i; ++j) {
      const float y = scaled<Multiply>(element<Bf16>(in, j), s);
      if (y != y) out[j] = scalar_code<Rule>(y);
    }
  for (; i < n; ++i) out[i] = scalar_code<Rule>(scaled<Multiply>(element<Bf16>(in, i), s));
}

// The runtime choice of formula becomes a specialization here, once per call (a row or a range).
template <bool Bf16>
void dispatch(const void* in, std::int64_t n, float s, bool multiply, e4m3_rule rule, std::uint8_t* out) {
  switch (rule) {
    case e4m3_rule::clamp_s_sat:
      return multiply ? run<Bf16, true, e4m3_rule::clamp_s_sat>(in, n, s, out) : run<Bf16, false, e4m3_rule::clamp_s_sat>(in, n, s, out);
    case e4m3_rule::clamp_t_tcvt:
      return multiply ? run<Bf16, true, e4m3_rule::clamp_t_tcvt>(in, n, s, out) : run<Bf16, false, e4m3_rule::clamp_t_tcvt>(in, n, s, out);
    case e4m3_rule::clamp_g_sat:
      return multiply ? run<Bf16, true, e4m3_rule::clamp_g_sat>(in, n, s, out) : run<Bf16, false, e4m3_rule::clamp_g_sat>(in, n, s, out);
    case e4m3_rule::tcvt:
      return multiply ? run<Bf16, true, e4m3_rule::tcvt>(in, n, s, out) : run<Bf16, false, e4m3_rule::tcvt>(in, n, s, out);
  }
}
#endif

}  // namespace

bool has_f16c_encoder() {
#ifdef QP_F16C_ENCODER
  // F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c".
  // QPOLICY_CPU_ENCODER=portable keeps the cloned loops, so that tests check them on this machine too.
  static const bool present = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx >> 29 & 1u);
    const char* choice = std::getenv("QPOLICY_CPU_ENCODER");
    return f16c && __builtin_cpu_supports("avx") && std::string_view(choice ? choice : "") != "portable";
  }();
  return present;
#else
  return false;
#endif
}

void f16c_codes_bf16(const std::uint16_t* in, std::int64_t n, float s, bool multiply, e4m3_rule rule, std::uint8_t* out) {
#ifdef QP_F16C_ENCODER
  dispatch<true>(in, n, s, multiply, rule, out);
#else
  (void)in, (void)n, (void)s, (void)multiply, (void)rule, (void)out;
#endif
}

void f16c_codes_f32(const float* in, std::int64_t n, float s, bool multiply, e4m3_rule rule, std::uint8_t* out) {
#ifdef QP_F16C_ENCODER
  dispatch<false>(in, n, s, multiply, rule, out);
#else
  (void)in, (void)n, (void)s, (void)multiply, (void)rule, (void)out;
#endif
}

}  // namespace qpolicy::cpu::detail
