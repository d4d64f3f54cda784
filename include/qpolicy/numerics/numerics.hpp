#pragma once
// The per-element arithmetic of FP8 (e4m3fn) quantization, exactly as ../shared/spec/fp8-numerics.md
// states it, shared by the CUDA kernels and the CPU backend (__host__ __device__): the two
// float32 -> e4m3fn conversions, decoding, the clamp idioms, UE8M0 rounding, bf16/fp16 widening.
// Integer bit manipulation only where the spec fixes a rounding, so both backends agree bit for bit.
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define QPOLICY_HD __host__ __device__ __forceinline__
#else
#define QPOLICY_HD inline
#endif

namespace qpolicy::fp8 {

/// The largest finite e4m3fn value.
inline constexpr float max_e4m3 = 448.0f;
/// f32(1 / f32(448 * 512)): the per-token and per-channel scale floor.
inline constexpr std::uint32_t min_scale_factor_bits = 0x36924925u;
/// f32(1e-10): the 1x128 group amax floor.
inline constexpr std::uint32_t group_eps_bits = 0x2EDBE6FFu;
/// f32(1e-4): the 128x128 block amax floor.
inline constexpr std::uint32_t block_floor_bits = 0x38D1B717u;
/// f32(1/448), for the compiled (Inductor) variant of the block scale.
inline constexpr std::uint32_t inv_448_bits = 0x3B124925u;

QPOLICY_HD std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
QPOLICY_HD float float_of(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

QPOLICY_HD float min_scale_factor() { return float_of(min_scale_factor_bits); }
QPOLICY_HD float group_eps() { return float_of(group_eps_bits); }
QPOLICY_HD float block_floor() { return float_of(block_floor_bits); }

/// IEEE maxNum / minNum (CUDA fmaxf / fminf): a NaN operand yields the other one.
QPOLICY_HD float max_num(float a, float b) {
  if (a != a) return b;
  if (b != b) return a;
  return a > b ? a : b;
}
QPOLICY_HD float min_num(float a, float b) {
  if (a != a) return b;
  if (b != b) return a;
  return a < b ? a : b;
}
/// torch's max / clamp: NaN propagates.
QPOLICY_HD float max_nan(float a, float b) {
  if (a != a || b != b) return a != a ? a : b;
  return a > b ? a : b;
}
QPOLICY_HD float abs_f32(float x) { return float_of(bits_of(x) & 0x7FFFFFFFu); }
QPOLICY_HD bool is_nan(float x) { return (bits_of(x) & 0x7FFFFFFFu) > 0x7F800000u; }

// The clamps against the constant +-448 (never NaN) as selects: minNum(v, M) is (v < M ? v : M) since a
// NaN v fails the comparison, and likewise for maxNum. Branch-free, so loops over them vectorize.
/// clampS: maxNum(-M, minNum(v, M)); NaN becomes +448.
QPOLICY_HD float clamp_s(float v) {
  const float t = v < max_e4m3 ? v : max_e4m3;
  return t > -max_e4m3 ? t : -max_e4m3;
}
/// clampG: minNum(maxNum(v, -M), M); NaN becomes -448.
QPOLICY_HD float clamp_g(float v) {
  const float t = v > -max_e4m3 ? v : -max_e4m3;
  return t < max_e4m3 ? t : max_e4m3;
}
/// clampT: torch clamp(v, -M, M); NaN passes through.
QPOLICY_HD float clamp_t(float v) {
  if (is_nan(v)) return v;
  return v < -max_e4m3 ? -max_e4m3 : (v > max_e4m3 ? max_e4m3 : v);
}

/// How a conversion treats magnitudes past the e4m3fn range, infinities and NaN.
enum class overflow : std::uint8_t {
  saturate,            // CUDA __NV_SATFINITE: +-448; NaN -> 0x7F without its sign
  saturate_keep_nan,   // torch .to(float8_e4m3fn), PyTorch >= 2.12: +-448; NaN keeps its sign
  to_nan,              // torch before 2.12, ml_dtypes' float8_e4m3fn: NaN, keeping the sign
};

/// float32 -> e4m3fn, round to nearest, ties to even; the sign is kept on zero. Written as selects
/// over integer and float operations (no branches) so CPU loops vectorize and GPU warps do not diverge.
template <overflow Mode>
QPOLICY_HD std::uint8_t encode(float x) {
  const std::uint32_t b = bits_of(x);
  const std::uint32_t sign = (b >> 24) & 0x80u;
  const std::uint32_t a = b & 0x7FFFFFFFu;
  // Normal range: keep 3 of the 23 mantissa bits, ties to even; a carry moves into the exponent.
  const std::uint32_t normal = ((a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20) - (120u << 3);
  // Below 2^-6: a multiple of 2^-9. Adding 2^14 (whose ulp is 2^-9) rounds to nearest-even exactly
  // there; the bits above 2^14's are the count of 2^-9 steps (8 is the smallest normal, 0x08).
  const std::uint32_t subnormal = bits_of(float_of(a) + 16384.0f) - 0x46800000u;
  std::uint32_t code = a < 0x3C800000u ? subnormal : normal;
  // Above 464 (464 ties down to 448), infinity, NaN.
  const std::uint32_t too_big = Mode == overflow::to_nan ? 0x7Fu : 0x7Eu;
  code = a > 0x43E80000u ? too_big : code;
  if (Mode == overflow::saturate_keep_nan) code = a > 0x7F800000u ? 0x7Fu : code;  // NaN stays NaN
  code |= sign;
  if (Mode == overflow::saturate) code = a > 0x7F800000u ? 0x7Fu : code;  // NaN drops its sign
  return static_cast<std::uint8_t>(code);
}

/// The two conversions of the spec (§2): CUDA's saturating cast, and torch's (PyTorch >= 2.12, which
/// vLLM pins) that saturates finite overflow and infinities too but keeps a NaN's sign.
QPOLICY_HD std::uint8_t sat(float x) { return encode<overflow::saturate>(x); }
QPOLICY_HD std::uint8_t tcvt(float x) { return encode<overflow::saturate_keep_nan>(x); }
/// torch's cast before 2.12 (overflow and infinities to NaN), which ml_dtypes' float8_e4m3fn still
/// implements: kept for the ml_dtypes witness and the vectors' `torch_before_2_12` column only.
QPOLICY_HD std::uint8_t tcvt_before_2_12(float x) { return encode<overflow::to_nan>(x); }

/// e4m3fn -> float32 (exact).
QPOLICY_HD float decode(std::uint8_t q) {
  const std::uint32_t sign = static_cast<std::uint32_t>(q & 0x80u) << 24;
  const std::uint32_t e = (q >> 3) & 0xFu, m = q & 7u;
  if (e == 15 && m == 7) return float_of(sign | 0x7FC00000u);
  if (e == 0) return float_of(sign | bits_of(static_cast<float>(m) * (1.0f / 512.0f)));
  return float_of(sign | ((e + 120u) << 23) | (m << 20));
}

/// UE8M0: a positive float32 rounded up to a power of two (exponent + 1 when the mantissa is not 0).
QPOLICY_HD float ue8m0(float v) {
  const std::uint32_t b = bits_of(v);
  std::uint32_t e = (b >> 23) & 0xFFu;
  if (b & 0x7FFFFFu) ++e;
  return float_of(e << 23);
}

/// Widening of 16-bit inputs to float32 (exact).
/// float32 -> bf16 bits, round to nearest even; a NaN stays a quiet NaN of the same sign.
QPOLICY_HD std::uint16_t to_bf16(float x) {
  const std::uint32_t u = bits_of(x);
  const std::uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const std::uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<std::uint16_t>(is_nan(x) ? nan : rounded);
}
QPOLICY_HD float from_bf16(std::uint16_t h) { return float_of(static_cast<std::uint32_t>(h) << 16); }
QPOLICY_HD float from_fp16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return float_of(sign | 0x7F800000u | (m << 13));  // inf / NaN
  if (e == 0) {
    if (m == 0) return float_of(sign);
    // Subnormal: m * 2^-24, exact in float32.
    return float_of(sign | bits_of(static_cast<float>(m) * (1.0f / 16777216.0f)));
  }
  return float_of(sign | ((e + 112u) << 23) | (m << 13));
}

}  // namespace qpolicy::fp8
