#pragma once
// The FP8 code loops' e4m3 encoder on AVX + F16C (defined in kernels/cpu/e4m3_encoder.cpp): the
// rounding happens on floats and F16C's conversion narrows the lanes, instead of the integer bit
// arithmetic of numerics.hpp's encode(), which machines without AVX2 run 4 lanes at a time. Bit for
// bit the scalar formulas' codes (tests/numerics/e4m3_encoder_test.cpp checks every float).
#include <cstdint>

namespace qpolicy::cpu::detail {

/// Which formula a code loop computes on y = x / s (or x * s): every non-NaN y saturates to +-448
/// in all four; they differ only in the code a NaN gets.
enum class e4m3_rule : std::uint8_t {
  clamp_s_sat,   // sat(clampS(y)): NaN -> 0x7E (+448)
  clamp_t_tcvt,  // tcvt(clampT(y)): NaN -> 0x7F with its sign
  clamp_g_sat,   // sat(clampG(y)): NaN -> 0xFE (-448)
  tcvt,          // tcvt(y): NaN -> 0x7F with its sign
};

/// Whether the code loops use this encoder: the machine has AVX and F16C, and QPOLICY_CPU_ENCODER is
/// not `portable` (read once).
bool has_f16c_encoder();

/// out[i] = rule(x[i] / s), or rule(x[i] * s) when `multiply`, for bf16 words or floats. Only where
/// has_f16c_encoder().
void f16c_codes_bf16(const std::uint16_t* in, std::int64_t n, float s, bool multiply, e4m3_rule rule, std::uint8_t* out);
void f16c_codes_f32(const float* in, std::int64_t n, float s, bool multiply, e4m3_rule rule, std::uint8_t* out);

}  // namespace qpolicy::cpu::detail
