#pragma once
// The element and scale formats of the four low-precision schemes (low-precision-numerics.md §1, §7):
// e2m1 (FP4) codes and their packing, E8M0 block scales and the three encoders vLLM's paths use, and
// the 128x4 tiled scale layout. __host__ __device__ and branch-light, shared by every backend like
// numerics.hpp; the low-precision quantizers are built on these.
#include <cstdint>

#include "numerics.hpp"
#include "tensor_view.hpp"

namespace qpolicy::lp {

using fp8::bits_of;
using fp8::float_of;

// ---- e2m1 (§1.1) ----

/// The magnitude of e2m1 code `c` (bits 0-2), as float32: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
QPOLICY_HD float e2m1_magnitude(std::uint8_t c) {
  // 2^(e-1) * (1 + m/2) for e = bits 1-2 > 0; m/2 for e = 0 (a subnormal step of 0.5).
  const unsigned e = (c >> 1) & 3u, m = c & 1u;
  return e == 0 ? 0.5f * static_cast<float>(m) : static_cast<float>(1u << (e - 1)) * (1.0f + 0.5f * static_cast<float>(m));
}

/// F4(c): the value of an e2m1 nibble; 0x8 is -0.0.
QPOLICY_HD float e2m1_value(std::uint8_t c) {
  const float v = e2m1_magnitude(c);
  return (c & 8u) ? -v : v;
}

/// e2m1(v): round |v| to the nearest e2m1 magnitude, ties to the even code (bit 0 clear), |v| > 6 and
/// inf saturate to 6; the sign bit is copied from v, zeros included. NaN gives 0x7 | sign, as vLLM's
/// Triton bit path does (PTX leaves it unspecified; §11).
QPOLICY_HD std::uint8_t e2m1_encode(float v) {
  const std::uint32_t u = bits_of(v);
  const std::uint8_t sign = static_cast<std::uint8_t>((u >> 28) & 8u);
  const float a = float_of(u & 0x7FFFFFFFu);
  if (!(a == a)) return static_cast<std::uint8_t>(sign | 7u);  // NaN: no midpoint compares below it
  // The midpoints between neighbouring magnitudes; at a tie the even code wins: 0.25 -> 0, 0.75 -> 2
  // (1.0), 1.25 -> 2, 1.75 -> 4 (2.0), 2.5 -> 4, 3.5 -> 6 (4.0), 5 -> 6. The code is the number of
  // midpoints below |v| (strictly below where the even code lies above): branch-free, so loops over
  // blocks vectorize.
  const std::uint8_t c = static_cast<std::uint8_t>((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
                                                   (a >= 3.5f) + (a > 5.0f));
  return static_cast<std::uint8_t>(sign | c);
}

/// Two codes in one byte: element 2j in the low nibble, 2j+1 in the high one.
QPOLICY_HD std::uint8_t e2m1_pack(std::uint8_t even, std::uint8_t odd) {
  return static_cast<std::uint8_t>((even & 0xFu) | ((odd & 0xFu) << 4));
}
QPOLICY_HD std::uint8_t e2m1_low(std::uint8_t byte) { return byte & 0xFu; }
QPOLICY_HD std::uint8_t e2m1_high(std::uint8_t byte) { return byte >> 4; }

// ---- E8M0 (§1.2) ----

/// E8(b) = 2^(b - 127) as float32 (b = 0 is the subnormal 2^-127); b = 255 is NaN.
QPOLICY_HD float e8m0_value(std::uint8_t b) {
  if (b == 255) return float_of(0x7FC00000u);
  if (b == 0) return float_of(0x00400000u);
  return float_of(static_cast<std::uint32_t>(b) << 23);
}

/// CEIL (§3.2 step 4): clamp(ceil(log2 r) + 127, 0, 254) for float32 r, exactly, from r's bits.
/// +inf gives 254; zero gives 0 (log2 is -inf); NaN gives 0 (torch's uint8 of a NaN float on CPU,
/// ASSUMED on CUDA, §11); negative r does not occur (r = max(amax, tiny) / 448).
QPOLICY_HD std::uint8_t e8m0_ceil(float r) {
  const std::uint32_t u = bits_of(r);
  if (!(r == r) || r <= 0.0f) return 0;
  const std::uint32_t exp = (u >> 23) & 0xFFu, man = u & 0x7FFFFFu;
  if (exp == 255) return 254;
  int log2_ceil;
  if (exp != 0) {
    log2_ceil = static_cast<int>(exp) - 127 + (man != 0);
  } else {  // subnormal: r = man * 2^-149
    int top = 22;
    while (!((man >> top) & 1u)) --top;
    log2_ceil = top - 149 + ((man & ((1u << top) - 1u)) != 0);
  }
  const int b = log2_ceil + 127;
  return static_cast<std::uint8_t>(b < 0 ? 0 : b > 254 ? 254 : b);
}

/// UE8M0-RP (§3.3 step 3): FlashInfer's round-up of a scale n to a power of two, from n's bits.
QPOLICY_HD std::uint8_t e8m0_round_up(float n) {
  if (!(n == n)) return 254;
  if (n <= 0.0f) return 0;
  const std::uint32_t u = bits_of(n), exp = (u >> 23) & 0xFFu, man = u & 0x7FFFFFu;
  if (exp == 0 && man <= 0x400000u) return 0;  // n <= 2^-127
  const std::uint32_t b = exp + (man != 0 ? 1u : 0u);
  return static_cast<std::uint8_t>(b > 254 ? 254 : b);
}

/// EVEN (§4.2 steps 2-3): amax rounded to one significand bit (up from 1.75), then floor(log2) - 2,
/// as MXFP4's weight quantizer computes it.
QPOLICY_HD std::uint8_t e8m0_even(float amax) {
  const std::uint32_t rounded = (bits_of(amax) + 0x200000u) & 0x7F800000u;
  const int e = static_cast<int>(rounded >> 23);
  if (e == 255) return 254;
  const int b = e - 2;
  return static_cast<std::uint8_t>(b < 0 ? 0 : b > 254 ? 254 : b);
}

// ---- rounding to the model dtype D (§0: rD) ----

/// float32 -> fp16 bits, round to nearest even; overflow to inf, NaN to a quiet NaN of the same sign.
QPOLICY_HD std::uint16_t to_fp16(float v) {
  const std::uint32_t u = bits_of(v);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u);
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to inf
  if (a >= 0x38800000u) {                                                   // a normal fp16
    const std::uint32_t half = ((((a >> 23) - 112u) << 10) | ((a & 0x7FFFFFu) >> 13));
    const std::uint32_t rest = a & 0x1FFFu;
    return static_cast<std::uint16_t>(sign | (half + (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))));
  }
  // A subnormal (or zero): a count of 2^-24 steps, rounded half to even (the scaling is exact).
  const float steps = float_of(a) * 16777216.0f;
  std::uint32_t n = static_cast<std::uint32_t>(steps);
  const float frac = steps - static_cast<float>(n);
  n += frac > 0.5f || (frac == 0.5f && (n & 1u));
  return static_cast<std::uint16_t>(sign | n);
}

/// rD(v): v rounded to the model dtype (bf16 or fp16, round to nearest even) and widened back.
QPOLICY_HD float round_to(element d, float v) {
  if (d == element::bf16) return fp8::from_bf16(fp8::to_bf16(v));
  if (d == element::f16) return fp8::from_fp16(to_fp16(v));
  return v;
}

// ---- the 128x4 scale layout (§7) ----

/// Rows and columns of the storage of an [m, s] scale matrix in the 128x4 layout: [ceil(m/128)*128,
/// ceil(s/4)*4] bytes (padding written 0).
QPOLICY_HD std::int64_t swizzled_rows(std::int64_t m) { return (m + 127) / 128 * 128; }
QPOLICY_HD std::int64_t swizzled_cols(std::int64_t s) { return (s + 3) / 4 * 4; }

/// Where scale (m, k) of an [*, s] scale matrix sits in the 128x4 layout.
QPOLICY_HD std::int64_t swizzled_offset(std::int64_t m, std::int64_t k, std::int64_t s) {
  return (((m / 128) * ((s + 3) / 4) + k / 4) * 32 + m % 32) * 16 + ((m / 32) % 4) * 4 + k % 4;
}

}  // namespace qpolicy::lp
