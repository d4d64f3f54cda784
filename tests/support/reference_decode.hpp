#pragma once
// A decoder written from the specs' formats, not from the library: the e4m3fn bit layout, the e2m1
// table, E8M0 as a power of two, each key's scale grid, NVFP4's e2m1 x (e4m3 x second scale), and
// float32 -> bf16 rounding. The decoder tests and the requantization tests compare the library's
// decode with it.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "qpolicy/schemes/formulas.hpp"

namespace qpolicy::test {

inline float e4m3_value(std::uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xF, mant = b & 7;
  if (exp == 15 && mant == 7) return std::nanf("");
  const float v = exp == 0 ? std::ldexp(static_cast<float>(mant) / 8.0f, -6) : std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
  return sign ? -v : v;
}
inline float e2m1_value(std::uint8_t c) {
  constexpr float table[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return c & 8 ? -table[c & 7] : table[c & 7];
}
inline float e8m0_value(std::uint8_t b) { return b == 255 ? std::nanf("") : std::ldexp(1.0f, b - 127); }

inline std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
/// float32 -> bf16 bits, round to nearest even; NaN quieted.
inline std::uint16_t bf16_of(float f) {
  const std::uint32_t u = bits(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  return static_cast<std::uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

/// The float32 value of element (r, k) of a [rows, cols] tensor formula `f` stored (row-major scales):
/// `codes`, `scales` (float32 or bytes, unaligned), `second` (float32 bytes: NVFP4's second scale(s),
/// or null). LUT-B has its own vectors and is not decoded here.
inline float reference_element(const schemes::formula_row& f, const std::uint8_t* codes, const std::uint8_t* scales, const std::uint8_t* second,
                               std::int64_t r, std::int64_t k, std::int64_t cols) {
  const auto i = static_cast<std::size_t>(r * cols + k);
  float c = 0.0f;
  if (f.codes == schemes::code_format::e4m3) c = e4m3_value(codes[i]);
  else if (f.codes == schemes::code_format::int8) c = static_cast<float>(static_cast<std::int8_t>(codes[i]));
  else c = e2m1_value(k % 2 ? codes[i / 2] >> 4 : codes[i / 2] & 0xF);
  const auto float_at = [](const std::uint8_t* p, std::int64_t at) {
    float x;
    std::memcpy(&x, p + at * 4, 4);
    return x;
  };
  if (f.scales == schemes::scale_format::f32) {
    // The key's grid: per tensor, per row (token or channel), 1xG groups, 128x128 blocks.
    const auto g = f.group;
    std::int64_t index = 0;
    if (g == per_token || g == per_channel) index = r;
    else if (g.row > 0 && g.col > 0) index = (r / g.row) * ((cols + g.col - 1) / g.col) + k / g.col;
    return c * float_at(scales, index);
  }
  const std::int64_t blocks = cols / f.block();
  const std::uint8_t b = scales[static_cast<std::size_t>(r * blocks + k / f.block())];
  const float s = f.scales == schemes::scale_format::e8m0 ? e8m0_value(b) : e4m3_value(b);
  if (f.second == schemes::second_scale::per_tensor) return c * (s * float_at(second, 0));
  if (f.second == schemes::second_scale::per_token) return c * (s * float_at(second, r));
  return c * s;
}

}  // namespace qpolicy::test
