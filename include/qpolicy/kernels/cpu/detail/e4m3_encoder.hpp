#pragma once
// The FP8 code loops' e4m3 encoder (defined in kernels/cpu/e4m3_encoder.cpp): the rounding happens on
// floats in vector lanes (kernels/cpu/quantize_rows.cpp on every target; AVX-512 with F16C's narrowing
// where the active target covers avx3), instead of the integer bit arithmetic of numerics.hpp's encode().
// Bit for bit the scalar formulas' codes (tests/numerics/e4m3_encoder_test.cpp checks every float).
#include <cstdint>
#include <type_traits>

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::cpu::detail {

/// Which formula a code loop computes on y = x / s (or x * s): every non-NaN y saturates to +-448
/// in all four; they differ only in the code a NaN gets.
enum class e4m3_rule : std::uint8_t {
  clamp_s_sat,   // sat(clampS(y)): NaN -> 0x7E (+448)
  clamp_t_tcvt,  // tcvt(clampT(y)): NaN -> 0x7F with its sign
  clamp_g_sat,   // sat(clampG(y)): NaN -> 0xFE (-448)
  tcvt,          // tcvt(y): NaN -> 0x7F with its sign
};

/// A code loop's formula: the rule, and whether y is x * s (a reciprocal scale) or x / s.
struct e4m3_formula {
  e4m3_rule rule;
  bool multiply;
};

/// The scalar formula of a rule: the code of y.
template <e4m3_rule Rule>
std::uint8_t rule_code(float y) {
  if constexpr (Rule == e4m3_rule::clamp_s_sat) return fp8::sat(fp8::clamp_s(y));
  else if constexpr (Rule == e4m3_rule::clamp_t_tcvt) return fp8::tcvt(fp8::clamp_t(y));
  else if constexpr (Rule == e4m3_rule::clamp_g_sat) return fp8::sat(fp8::clamp_g(y));
  else return fp8::tcvt(y);
}

/// fn(rule, multiply) with f's rule and multiply as std::integral_constant values: the one place where
/// a runtime formula becomes template arguments (the encoder's loops and the portable ones).
template <class Fn>
void visit_formula(e4m3_formula f, Fn&& fn) {
  const auto with_rule = [&](auto rule) {
    if (f.multiply) fn(rule, std::true_type{});
    else fn(rule, std::false_type{});
  };
  switch (f.rule) {
    case e4m3_rule::clamp_s_sat: return with_rule(std::integral_constant<e4m3_rule, e4m3_rule::clamp_s_sat>{});
    case e4m3_rule::clamp_t_tcvt: return with_rule(std::integral_constant<e4m3_rule, e4m3_rule::clamp_t_tcvt>{});
    case e4m3_rule::clamp_g_sat: return with_rule(std::integral_constant<e4m3_rule, e4m3_rule::clamp_g_sat>{});
    case e4m3_rule::tcvt: return with_rule(std::integral_constant<e4m3_rule, e4m3_rule::tcvt>{});
  }
}

/// Whether the AVX-512 (F, BW, VL, DQ) row kernels run (MXFP4 codes, e2m1 decodes): the active CPU
/// target covers avx3.
inline bool has_avx512_kernels() { return QPOLICY_X86_KERNELS && cpu_target_covers(cpu_target::avx3); }

/// One run of n elements in segments of `width` (the last may be shorter), segment j with scale s[j]:
/// out[i] = rule(x[i] / s[i / width]), or times it. For bf16 words or floats. `next`, when not null, is
/// what the caller reads after this run (n elements of the same type from there): it is fetched into
/// the cache while this run is encoded, so that a caller's next amax pass finds it there.
void encode_e4m3_bf16(const std::uint16_t* in, std::int64_t n, std::int64_t width, const float* s, e4m3_formula f,
                      std::uint8_t* out, const void* next = nullptr);
void encode_e4m3_f32(const float* in, std::int64_t n, std::int64_t width, const float* s, e4m3_formula f, std::uint8_t* out,
                     const void* next = nullptr);

}  // namespace qpolicy::cpu::detail
