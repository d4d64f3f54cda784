// The quantizers' vector passes (quantize_rows.hpp) in portable SIMD: compiled once per target of the
// platform, the implementation of the active CPU target called through QPOLICY_DISPATCH. Every pass works
// on the bits the scalar formulas define: magnitudes compared as integers (a non-negative float's bits
// order like its value), e4m3 and e2m1 rounding by exact float steps, and no fused multiply-add but the
// Hadamard rotation's, whose reference chains are fused.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/quantize_rows.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "decode_rows-inl.h"
#include "hwy_dispatch.hpp"
#include "quantize_rows.hpp"
#include "qpolicy/numerics/detail/low_precision_blocks.hpp"

HWY_BEFORE_NAMESPACE();
namespace qpolicy::cpu::detail {
namespace HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

/// At most 16 float32 lanes: a 16- or 32-element block is whole vectors on every target.
using lanes_f32 = hn::CappedTag<float, 16>;
using lanes_i32 = hn::RebindToSigned<lanes_f32>;
using lanes_u32 = hn::RebindToUnsigned<lanes_f32>;

/// The magnitude bits of float lanes, as int32 (at most 0x7FFFFFFF, so signed order is the value's).
HWY_INLINE hn::Vec<lanes_i32> magnitude_of(hn::Vec<lanes_f32> v) {
  const lanes_i32 di;
  return hn::And(hn::BitCast(di, v), hn::Set(di, 0x7FFFFFFF));
}

/// A vector's worth of bf16 words widened to float32 lanes: a bf16 is the top half of its float.
HWY_INLINE hn::Vec<lanes_f32> load_bf16(const std::uint16_t* p) {
  const lanes_f32 df;
  const lanes_u32 du;
  const hn::Rebind<std::uint16_t, lanes_f32> d16;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
}

using lanes_u8 = hn::Rebind<std::uint8_t, lanes_f32>;

/// The three E8M0 roundings of the MX formats.
enum class e8m0_rule { ceil, round_up, even };

/// sat(y) per lane, as code bytes (garbage where y is NaN): |y| capped at 448 (all of (448, 464] rounds
/// to 448 and the rest saturates there), then rounded to e4m3's grid by adding and subtracting
/// c = 2^(E + 20) for the binade E of |y| (at least 2^-6): the sum lies in c's binade, whose ulp 2^(E-3)
/// is e4m3's step at |y|, so the addition rounds to nearest even and the subtraction is exact. The sign
/// bit comes along, -0's too. Then the code of the rounded value r, exactly:
/// - where the target converts float32 to float16 in hardware (AVX2, AVX-512, NEON, SVE): r * 2^-8 is a
///   float16 (e4m3 spans 2^-9 to 448; float16's subnormal step is 2^-24) whose bits >> 7 are the code,
///   the exponent fields lining up (bias 15 against 7, shifted by 8) and subnormals with subnormals;
/// - elsewhere: a normal r's float32 bits >> 20 rebiased (bias 127 against 7), and a subnormal one as
///   r + 2^-6, which is the normal code 8 plus r's.
HWY_INLINE hn::Vec<lanes_u8> e4m3_code_bytes(hn::Vec<lanes_f32> y) {
  const lanes_f32 d;
  const lanes_u32 du;
  const auto sign = hn::And(hn::BitCast(du, y), hn::Set(du, 0x80000000u));
  const auto a = hn::Min(hn::Abs(y), hn::Set(d, 448.0f));
  const auto binade = hn::BitCast(d, hn::And(hn::BitCast(du, a), hn::Set(du, 0x7F800000u)));
  const auto c = hn::Mul(hn::Max(binade, hn::Set(d, 0x1p-6f)), hn::Set(d, 0x1p20f));
  const auto rounded = hn::Sub(hn::Add(a, c), c);
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
  const auto subnormal = hn::Lt(rounded, hn::Set(d, 0x1p-6f));
  const auto lifted = hn::BitCast(du, hn::Add(rounded, hn::IfThenElseZero(subnormal, hn::Set(d, 0x1p-6f))));
  const auto offset = hn::IfThenElse(hn::RebindMask(du, subnormal), hn::Set(du, 968u), hn::Set(du, 960u));
  return hn::DemoteTo(lanes_u8(), hn::BitCast(lanes_i32(), hn::Or(hn::Sub(hn::ShiftRight<20>(lifted), offset), hn::ShiftRight<24>(sign))));
#else
  const hn::Rebind<hwy::float16_t, lanes_f32> dh;
  const hn::Rebind<std::int16_t, lanes_f32> di16;
  const hn::Rebind<std::uint16_t, lanes_f32> du16;
  const auto half = hn::BitCast(di16, hn::DemoteTo(dh, hn::BitCast(d, hn::Or(hn::BitCast(du, hn::Mul(rounded, hn::Set(d, 0x1p-8f))), sign))));
  // half >> 7 is the code's magnitude, plus 256 when negative; less 384 there, it is the code as a
  // signed byte (code - 256), which the signed narrowing keeps.
  const auto code = hn::Sub(hn::BitCast(di16, hn::ShiftRight<7>(hn::BitCast(du16, half))), hn::And(hn::ShiftRight<15>(half), hn::Set(di16, 384)));
  return hn::BitCast(lanes_u8(), hn::DemoteTo(hn::Rebind<std::int8_t, lanes_f32>(), code));
#endif
}

/// lp::e2m1_encode per lane, as int32 0..15: the sign bit, and the count of rounding thresholds the
/// magnitude passes (> 0.25, >= 0.75, > 1.25, >= 1.75, > 2.5, >= 3.5, > 5), compared as bits; a NaN's
/// bits pass all seven (code 7, as the scalar encoder gives it).
HWY_INLINE hn::Vec<lanes_i32> e2m1_code_lanes(hn::Vec<lanes_f32> y) {
  const lanes_i32 di;
  const auto a = magnitude_of(y);
  static constexpr std::int32_t above[7] = {0x3E800000, 0x3F3FFFFF, 0x3FA00000, 0x3FDFFFFF, 0x40200000, 0x405FFFFF, 0x40A00000};
  auto count = hn::Zero(di);
  for (const std::int32_t t : above) count = hn::Sub(count, hn::VecFromMask(di, hn::Gt(a, hn::Set(di, t))));
  return hn::Or(count, hn::And(hn::ShiftRight<28>(hn::BitCast(di, y)), hn::Set(di, 8)));
}

template <bool Bf16>
HWY_INLINE hn::Vec<lanes_f32> load_lanes(const void* in, std::int64_t i) {
  if constexpr (Bf16) return load_bf16(static_cast<const std::uint16_t*>(in) + i);
  else return hn::LoadU(lanes_f32(), static_cast<const float*>(in) + i);
}

template <bool Bf16>
float element_at(const void* in, std::int64_t i) {
  return Bf16 ? fp8::from_bf16(static_cast<const std::uint16_t*>(in)[i]) : static_cast<const float*>(in)[i];
}

template <bool Bf16, bool Multiply>
bool sat_codes_run(const void* in, std::int64_t n, std::int64_t width, const float* s, std::uint8_t* out, const void* ahead) {
  const lanes_f32 d;
  const lanes_i32 di;
  const lanes_u8 d8;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  constexpr std::int64_t bytes = Bf16 ? 2 : 4;
  const char* next = static_cast<const char*>(ahead);
  auto nan_lanes = hn::Zero(di);
  const auto encode = [&](hn::Vec<lanes_f32> x, hn::Vec<lanes_f32> factor) {
    const auto y = Multiply ? hn::Mul(x, factor) : hn::Div(x, factor);
    nan_lanes = hn::Or(nan_lanes, hn::VecFromMask(di, hn::RebindMask(di, hn::IsNaN(y))));
    return e4m3_code_bytes(y);
  };
  for (std::int64_t c0 = 0, j = 0; c0 < n; c0 += width, ++j) {
    const std::int64_t end = std::min(n, c0 + width);
    const auto factor = hn::Set(d, s[j]);
    std::int64_t i = c0;
    for (; i + L <= end; i += L) {
      if (next) hwy::Prefetch(next + i * bytes);
      hn::StoreU(encode(load_lanes<Bf16>(in, i), factor), d8, out + i);
    }
    if (i < end) {  // the segment's tail through a zero-padded vector (a padded lane's NaN only costs a recheck)
      alignas(64) float staged[16] = {};
      alignas(16) std::uint8_t codes[16];
      for (std::int64_t t = i; t < end; ++t) staged[t - i] = element_at<Bf16>(in, t);
      hn::StoreU(encode(hn::Load(d, staged), factor), d8, codes);
      std::memcpy(out + i, codes, static_cast<std::size_t>(end - i));
    }
  }
  return !hn::AllFalse(di, hn::Ne(nan_lanes, hn::Zero(di)));
}

}  // namespace

void widen_bf16_run(const std::uint16_t* HWY_RESTRICT in, std::int64_t n, float* HWY_RESTRICT out) {
  const lanes_f32 d;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(load_bf16(in + i), d, out + i);
  for (; i < n; ++i) out[i] = fp8::from_bf16(in[i]);
}

void widen_f16_run(const std::uint16_t* HWY_RESTRICT in, std::int64_t n, float* HWY_RESTRICT out) {
  // fp8::from_fp16 per lane in integer steps (Highway's own fp16 promotion, emulated where the CPU lacks
  // F16C, gives no infinity or NaN): a normal's exponent rebiased by 112 with the mantissa moved up, a
  // subnormal's mantissa times 2^-24 (exact), infinity and NaN with their payload.
  const lanes_f32 df;
  const lanes_i32 di;
  const lanes_u32 du;
  const hn::Rebind<std::uint16_t, lanes_f32> d16;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t i = 0;
  for (; i + L <= n; i += L) {
    const auto h = hn::PromoteTo(du, hn::LoadU(d16, in + i));
    const auto magnitude = hn::And(h, hn::Set(du, 0x7FFFu));
    const auto moved = hn::ShiftLeft<13>(magnitude);
    const auto normal = hn::Add(moved, hn::Set(du, 112u << 23));
    const auto special = hn::Or(moved, hn::Set(du, 0x7F800000u));
    const auto subnormal = hn::BitCast(du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, magnitude)), hn::Set(df, 0x1p-24f)));
    const auto value = hn::IfThenElse(hn::Lt(magnitude, hn::Set(du, 0x0400u)), subnormal,
                                      hn::IfThenElse(hn::Lt(magnitude, hn::Set(du, 0x7C00u)), normal, special));
    hn::StoreU(hn::BitCast(df, hn::Or(value, hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u))))), df, out + i);
  }
  for (; i < n; ++i) out[i] = fp8::from_fp16(in[i]);
}

std::uint32_t magnitude_bits_f32_run(const float* HWY_RESTRICT v, std::int64_t n, bool* nan) {
  const lanes_f32 d;
  const lanes_i32 di;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  const auto infinity = hn::Set(di, 0x7F800000);
  auto acc0 = hn::Zero(di), acc1 = hn::Zero(di), nans = hn::Zero(di);
  std::int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    const auto u0 = magnitude_of(hn::LoadU(d, v + i)), u1 = magnitude_of(hn::LoadU(d, v + i + L));
    const auto n0 = hn::Gt(u0, infinity), n1 = hn::Gt(u1, infinity);
    acc0 = hn::Max(acc0, hn::IfThenZeroElse(n0, u0));
    acc1 = hn::Max(acc1, hn::IfThenZeroElse(n1, u1));
    nans = hn::Or(nans, hn::Or(hn::VecFromMask(di, n0), hn::VecFromMask(di, n1)));
  }
  auto widest = static_cast<std::uint32_t>(hn::GetLane(hn::MaxOfLanes(di, hn::Max(acc0, acc1))));
  bool any = !hn::AllFalse(di, hn::Ne(nans, hn::Zero(di)));
  for (; i < n; ++i) {
    const std::uint32_t u = fp8::bits_of(v[i]) & 0x7FFFFFFFu;
    any |= u > 0x7F800000u;
    widest = u <= 0x7F800000u && u > widest ? u : widest;
  }
  *nan = *nan || any;
  return widest;
}

void magnitude_bits_bf16_run(const std::uint16_t* HWY_RESTRICT words, std::int64_t n, std::int64_t width, std::uint16_t* HWY_RESTRICT acc,
                             bool* nan) {
  const hn::CappedTag<std::int16_t, 32> d;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  const auto magnitude = hn::Set(d, 0x7FFF), infinity = hn::Set(d, 0x7F80);
  const auto* in = reinterpret_cast<const std::int16_t*>(words);
  auto nans = hn::Zero(d);
  bool any = false;
  for (std::int64_t c0 = 0, j = 0; c0 < n; c0 += width, ++j) {
    const std::int64_t end = std::min(n, c0 + width);
    auto m = hn::Zero(d);
    std::int64_t i = c0;
    for (; i + L <= end; i += L) {
      const auto u = hn::And(hn::LoadU(d, in + i), magnitude);
      nans = hn::Or(nans, hn::VecFromMask(d, hn::Gt(u, infinity)));
      m = hn::Max(m, u);
    }
    auto a = static_cast<std::uint16_t>(hn::GetLane(hn::MaxOfLanes(d, m)));
    for (; i < end; ++i) {
      const std::uint16_t u = words[i] & 0x7FFF;
      any |= u > 0x7F80;
      a = u > a ? u : a;
    }
    acc[j] = a > acc[j] ? a : acc[j];
  }
  *nan = *nan || any || !hn::AllFalse(d, hn::Ne(nans, hn::Zero(d)));
}

void block_magnitude_bits_run(const float* HWY_RESTRICT x, std::int64_t blocks, std::int64_t block, std::uint32_t* HWY_RESTRICT finite_or_inf,
                              std::uint32_t* HWY_RESTRICT widest) {
  const lanes_f32 d;
  const lanes_i32 di;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  const auto infinity = hn::Set(di, 0x7F800000);
  for (std::int64_t j = 0; j < blocks; ++j) {
    auto ignoring = hn::Zero(di), all = hn::Zero(di);
    for (std::int64_t i = 0; i < block; i += L) {
      const auto u = magnitude_of(hn::LoadU(d, x + j * block + i));
      all = hn::Max(all, u);
      ignoring = hn::Max(ignoring, hn::IfThenZeroElse(hn::Gt(u, infinity), u));
    }
    finite_or_inf[j] = static_cast<std::uint32_t>(hn::GetLane(hn::MaxOfLanes(di, ignoring)));
    widest[j] = static_cast<std::uint32_t>(hn::GetLane(hn::MaxOfLanes(di, all)));
  }
}

bool sat_codes_f32_run(const float* in, std::int64_t n, std::int64_t width, const float* s, bool multiply, std::uint8_t* out,
                        const void* ahead) {
  return multiply ? sat_codes_run<false, true>(in, n, width, s, out, ahead) : sat_codes_run<false, false>(in, n, width, s, out, ahead);
}

bool sat_codes_bf16_run(const std::uint16_t* in, std::int64_t n, std::int64_t width, const float* s, bool multiply, std::uint8_t* out,
                         const void* ahead) {
  return multiply ? sat_codes_run<true, true>(in, n, width, s, out, ahead) : sat_codes_run<true, false>(in, n, width, s, out, ahead);
}

void e2m1_codes_run(const float* HWY_RESTRICT x, std::int64_t blocks, std::int64_t block, const float* HWY_RESTRICT multipliers,
                    std::uint8_t* HWY_RESTRICT packed) {
  const lanes_f32 d;
  const hn::Rebind<std::uint8_t, lanes_f32> d8;
  const hn::CappedTag<std::int16_t, 16> d16;  // a pair of codes (each at most 15) is a positive int16
  const hn::Rebind<std::uint8_t, decltype(d16)> d16to8;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d)), L16 = static_cast<std::int64_t>(hn::Lanes(d16));
  // A chunk's codes one per byte (a vector never straddles two blocks: L divides 16), then packed in pairs.
  constexpr std::int64_t chunk = 1024;
  alignas(64) std::uint8_t codes[chunk];
  const std::int64_t total = blocks * block;
  for (std::int64_t c0 = 0; c0 < total; c0 += chunk) {
    const std::int64_t count = std::min(chunk, total - c0);
    for (std::int64_t i = 0; i < count; i += L) {
      const auto y = hn::Mul(hn::LoadU(d, x + c0 + i), hn::Set(d, multipliers[(c0 + i) / block]));
      hn::StoreU(hn::DemoteTo(d8, e2m1_code_lanes(y)), d8, codes + i);
    }
    std::int64_t i = 0;
    for (; i + 2 * L16 <= count; i += 2 * L16) {
      const auto pairs = hn::LoadU(d16, reinterpret_cast<const std::int16_t*>(codes + i));
      const auto byte = hn::Or(hn::And(pairs, hn::Set(d16, 0x000F)), hn::And(hn::ShiftRight<4>(pairs), hn::Set(d16, 0x00F0)));
      hn::StoreU(hn::DemoteTo(d16to8, byte), d16to8, packed + (c0 + i) / 2);
    }
    for (; i < count; i += 2) packed[(c0 + i) / 2] = static_cast<std::uint8_t>((codes[i] & 0xFu) | ((codes[i + 1] & 0xFu) << 4));
  }
}

/// E8M0 bytes per lane from positive float32 values (or zero, infinity, NaN), each rule's bits as
/// numerics/low_precision.hpp's scalar function computes them:
/// - CEIL (e8m0_ceil): clamp(ceil(log2 r) + 127, 0, 254); a subnormal r's log2 from its mantissa as a float
///   (exact), whose exponent is the top bit's place and whose fraction says whether more bits follow;
/// - RP (e8m0_round_up): the exponent, plus one if the mantissa is not zero, 0 up to 2^-127, NaN 254;
/// - EVEN (e8m0_even): the exponent after rounding to one significand bit, less 2.
template <e8m0_rule Rule>
HWY_INLINE hn::Vec<lanes_i32> e8m0_lanes(hn::Vec<lanes_f32> r) {
  const lanes_f32 d;
  const lanes_i32 di;
  const auto u = hn::BitCast(di, r);
  const auto exponent = hn::And(hn::ShiftRight<23>(u), hn::Set(di, 0xFF)), mantissa = hn::And(u, hn::Set(di, 0x7FFFFF));
  const auto fraction = hn::VecFromMask(di, hn::Ne(mantissa, hn::Zero(di)));  // -1 where the mantissa is not zero
  const auto clamp = [&](auto b) { return hn::Min(hn::Max(b, hn::Zero(di)), hn::Set(di, 254)); };
  if constexpr (Rule == e8m0_rule::ceil) {
    const auto top = hn::BitCast(di, hn::ConvertTo(d, mantissa));  // mantissa < 2^23: exact
    const auto sub_log2 = hn::Sub(hn::Sub(hn::ShiftRight<23>(top), hn::Set(di, 127 + 149)),
                                  hn::VecFromMask(di, hn::Ne(hn::And(top, hn::Set(di, 0x7FFFFF)), hn::Zero(di))));
    const auto log2 = hn::IfThenElse(hn::Eq(exponent, hn::Zero(di)), sub_log2, hn::Sub(hn::Sub(exponent, hn::Set(di, 127)), fraction));
    const auto b = hn::IfThenElse(hn::Eq(exponent, hn::Set(di, 255)), hn::Set(di, 254), clamp(hn::Add(log2, hn::Set(di, 127))));
    return hn::IfThenZeroElse(hn::RebindMask(di, hn::Not(hn::Gt(r, hn::Zero(d)))), b);  // zero and NaN: 0
  } else if constexpr (Rule == e8m0_rule::round_up) {
    const auto b = hn::Min(hn::Sub(exponent, fraction), hn::Set(di, 254));
    const auto tiny = hn::Lt(u, hn::Set(di, 0x400001));  // r <= 2^-127 (r is not negative)
    return hn::IfThenElse(hn::RebindMask(di, hn::IsNaN(r)), hn::Set(di, 254), hn::IfThenZeroElse(tiny, b));
  } else {
    const auto e = hn::ShiftRight<23>(hn::And(hn::Add(u, hn::Set(di, 0x200000)), hn::Set(di, 0x7F800000)));
    return hn::IfThenElse(hn::Eq(e, hn::Set(di, 255)), hn::Set(di, 254), clamp(hn::Sub(e, hn::Set(di, 2))));
  }
}

void e8m0_block_scales_run(const std::uint32_t* HWY_RESTRICT amax, const std::uint32_t* HWY_RESTRICT widest, std::int64_t n, e8m0_scales kind,
                           std::uint8_t* HWY_RESTRICT scales, float* HWY_RESTRICT multipliers) {
  const lanes_f32 d;
  const lanes_i32 di;
  const lanes_u32 du;
  const lanes_u8 d8;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  // The codes' multipliers from the byte b: 1 / E8(b) = 2^(127 - b) exactly (2^-127 for 254 is the
  // subnormal 0x00400000), or FlashInfer's inverse 2^(127 - b) with 0 for b = 0 and 2^-127 flushed to 0.
  const auto reciprocal = [&](auto b) {
    return hn::BitCast(d, hn::IfThenElse(hn::Eq(b, hn::Set(di, 254)), hn::Set(di, 0x00400000), hn::ShiftLeft<23>(hn::Sub(hn::Set(di, 254), b))));
  };
  const auto inverse = [&](auto b) {
    const auto value = hn::BitCast(d, hn::ShiftLeft<23>(hn::Max(hn::Sub(hn::Set(di, 254), b), hn::Zero(di))));
    return hn::IfThenZeroElse(hn::RebindMask(d, hn::Eq(b, hn::Zero(di))), value);
  };
  std::int64_t j = 0;
  for (; j + L <= n; j += L) {
    const auto a = hn::BitCast(d, hn::LoadU(du, amax + j));  // NaN-ignoring
    hn::Vec<lanes_i32> b;
    hn::Vec<lanes_f32> m;
    switch (kind) {
      case e8m0_scales::mxfp8_torch: {
        // CEIL of max(amax, 2^-126) / 448; a block with a NaN: byte 0 and a (positive) NaN multiplier.
        const auto nan = hn::RebindMask(d, hn::Gt(hn::LoadU(du, widest + j), hn::Set(du, 0x7F800000u)));
        const auto floor = hn::BitCast(d, hn::Max(hn::BitCast(di, a), hn::Set(di, 0x00800000)));
        b = hn::IfThenZeroElse(hn::RebindMask(di, nan), e8m0_lanes<e8m0_rule::ceil>(hn::Div(floor, hn::Set(d, fp8::max_e4m3))));
        m = hn::IfThenElse(nan, hn::BitCast(d, hn::Set(di, 0x7FC00000)), reciprocal(b));
        break;
      }
      case e8m0_scales::mxfp8_flashinfer:
        b = e8m0_lanes<e8m0_rule::round_up>(hn::Mul(a, hn::Set(d, fp8::float_of(fp8::inv_448_bits))));
        m = inverse(b);
        break;
      case e8m0_scales::mxfp4_rceil:
        b = e8m0_lanes<e8m0_rule::round_up>(hn::Mul(a, hn::Set(d, fp8::float_of(0x3E2AAAABu))));
        m = inverse(b);
        break;
      case e8m0_scales::mxfp4_even:
        b = e8m0_lanes<e8m0_rule::even>(a);
        m = reciprocal(b);
        break;
    }
    hn::StoreU(hn::DemoteTo(d8, b), d8, scales + j);
    hn::StoreU(m, d, multipliers + j);
  }
  for (; j < n; ++j) {
    const float a = fp8::float_of(amax[j]);
    std::uint8_t b = 0;
    float m = 0.0f;
    switch (kind) {
      case e8m0_scales::mxfp8_torch: {
        const bool nan = widest[j] > 0x7F800000u;
        const float tiny = fp8::float_of(0x00800000u);
        b = nan ? 0 : lp::e8m0_ceil((a > tiny ? a : tiny) / fp8::max_e4m3);
        m = nan ? fp8::float_of(0x7FC00000u) : fp8::float_of(b == 254 ? 0x00400000u : (254u - b) << 23);
        break;
      }
      case e8m0_scales::mxfp8_flashinfer:
        b = lp::e8m0_round_up(a * fp8::float_of(fp8::inv_448_bits));
        m = lp::flashinfer_inverse(b);
        break;
      case e8m0_scales::mxfp4_rceil:
        b = lp::e8m0_round_up(a * fp8::float_of(0x3E2AAAABu));
        m = lp::flashinfer_inverse(b);
        break;
      case e8m0_scales::mxfp4_even:
        b = lp::e8m0_even(a);
        m = fp8::float_of(b == 254 ? 0x00400000u : (254u - b) << 23);
        break;
    }
    scales[j] = b;
    multipliers[j] = m;
  }
}

bool nvfp4_block_scales_run(const std::uint32_t* HWY_RESTRICT amax, std::int64_t n, float encode, bool zero_if_scale_zero,
                            std::uint8_t* HWY_RESTRICT scales, float* HWY_RESTRICT multipliers) {
  // The block function's steps per lane: sf = sat(encode * (a * (1/6))), its e4m3 value, and the codes'
  // multiplier 1 / (value * (1 / encode)), or 0 for a zero scale (weights) or a zero amax (activations).
  // A NaN product (an infinite encode scale times a zero amax) is the caller's: false.
  const lanes_f32 d;
  const lanes_i32 di;
  const lanes_u32 du;
  const lanes_u8 d8;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  const auto sixth = hn::Set(d, fp8::float_of(0x3E2AAAABu)), by = hn::Set(d, encode), decode = hn::Set(d, 1.0f / encode);
  auto nan = hn::Zero(di);
  std::int64_t j = 0;
  for (; j + L <= n; j += L) {
    const auto a = hn::BitCast(d, hn::LoadU(du, amax + j));
    const auto t = hn::Mul(by, hn::Mul(a, sixth));
    nan = hn::Or(nan, hn::VecFromMask(di, hn::RebindMask(di, hn::IsNaN(t))));
    const auto code = e4m3_code_bytes(t);
    hn::StoreU(code, d8, scales + j);
    const auto scale = e4m3_lanes(du, hn::PromoteTo(du, code));
    const auto zero = zero_if_scale_zero ? hn::Eq(scale, hn::Zero(d)) : hn::Eq(a, hn::Zero(d));
    hn::StoreU(hn::IfThenZeroElse(zero, hn::Div(hn::Set(d, 1.0f), hn::Mul(scale, decode))), d, multipliers + j);
  }
  for (; j < n; ++j) {
    const float a = fp8::float_of(amax[j]), t = encode * (a * fp8::float_of(0x3E2AAAABu));
    if (t != t) return false;
    scales[j] = fp8::sat(t);
    const float scale = fp8::decode(scales[j]);
    multipliers[j] = (zero_if_scale_zero ? scale == 0.0f : a == 0.0f) ? 0.0f : 1.0f / (scale * (1.0f / encode));
  }
  return hn::AllFalse(di, hn::Ne(nan, hn::Zero(di)));
}

template <int Drop>
void int8_codes_of(const float* HWY_RESTRICT row, std::int64_t n, float s, element type, std::int8_t* HWY_RESTRICT q) {
  const lanes_f32 d;
  const lanes_i32 di;
  const lanes_u32 du;
  const hn::Rebind<std::int8_t, lanes_f32> d8;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  const auto scale = hn::Set(d, s), magic = hn::Set(d, 12582912.0f);
  std::int64_t i = 0;
  for (; i + L <= n; i += L) {
    const auto v = hn::Div(hn::LoadU(d, row + i), scale);
    auto t = v;
    if constexpr (Drop > 0) {  // rD: round to nearest even at bit Drop (a NaN is decided before: its bits may round to infinity)
      const auto u = hn::BitCast(du, v);
      const auto odd = hn::And(hn::ShiftRight<Drop>(u), hn::Set(du, 1u));
      t = hn::BitCast(d, hn::And(hn::Add(hn::Add(u, hn::Set(du, (1u << (Drop - 1)) - 1u)), odd), hn::Set(du, ~((1u << Drop) - 1u))));
    }
    // Clamped first, then rounded to an integer half to even by 1.5 * 2^23 (lp::int8_code); NaN -> 0.
    const auto c = hn::Min(hn::Max(hn::IfThenZeroElse(hn::IsNaN(v), t), hn::Set(d, -127.0f)), hn::Set(d, 127.0f));
    hn::StoreU(hn::DemoteTo(d8, hn::ConvertTo(di, hn::Sub(hn::Add(c, magic), magic))), d8, q + i);
  }
  for (; i < n; ++i) q[i] = lp::int8_code(type, row[i], s);
}

void int8_codes_run(const float* row, std::int64_t n, float s, model_rounding rounding, std::int8_t* q) {
  switch (rounding) {
    case model_rounding::bf16: return int8_codes_of<16>(row, n, s, element::bf16, q);
    case model_rounding::f16: return int8_codes_of<13>(row, n, s, element::f16, q);
    case model_rounding::f32: return int8_codes_of<0>(row, n, s, element::f32, q);
  }
}

/// One block's outputs j in [j0, j0 + L): the fused multiply-add chain over i of x[i] * h[i][j] from 0,
/// in i's order, plus 0 (the reference's last step: -0 becomes +0).
HWY_INLINE void rotate_chunk(const float* HWY_RESTRICT x, const float* HWY_RESTRICT h, std::int64_t n, std::int64_t j0, float* HWY_RESTRICT out) {
  const lanes_f32 d;
  auto acc = hn::Zero(d);
  for (std::int64_t i = 0; i < n; ++i) acc = hn::MulAdd(hn::Set(d, x[i]), hn::LoadU(d, h + i * n + j0), acc);
  hn::StoreU(hn::Add(acc, hn::Zero(d)), d, out + j0);
}

void rotate_blocks_run(const float* HWY_RESTRICT x, std::int64_t blocks, const float* HWY_RESTRICT h, std::int64_t n, float* HWY_RESTRICT out) {
  std::int64_t b = 0;
#if HWY_NATIVE_FMA
  const lanes_f32 d;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  if (n == 32 && L >= 4) {
    // Eight chains in flight: accumulator k holds block b + k / chunks, columns (k % chunks) * L onwards.
    const std::int64_t chunks = 32 / L, per_step = 8 / chunks;
    for (; b + per_step <= blocks; b += per_step) {
      auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
      auto a4 = hn::Zero(d), a5 = hn::Zero(d), a6 = hn::Zero(d), a7 = hn::Zero(d);
      const float* xb = x + b * 32;
      for (std::int64_t i = 0; i < 32; ++i) {
        const float* hi = h + i * 32;
        const auto step = [&](auto& acc, std::int64_t k) {
          acc = hn::MulAdd(hn::Set(d, xb[k / chunks * 32 + i]), hn::LoadU(d, hi + k % chunks * L), acc);
        };
        step(a0, 0), step(a1, 1), step(a2, 2), step(a3, 3), step(a4, 4), step(a5, 5), step(a6, 6), step(a7, 7);
      }
      const auto store = [&](const auto& acc, std::int64_t k) { hn::StoreU(hn::Add(acc, hn::Zero(d)), d, out + b * 32 + k / chunks * 32 + k % chunks * L); };
      store(a0, 0), store(a1, 1), store(a2, 2), store(a3, 3), store(a4, 4), store(a5, 5), store(a6, 6), store(a7, 7);
    }
  }
  if (n % L == 0) {
    for (; b < blocks; ++b)
      for (std::int64_t j0 = 0; j0 < n; j0 += L) rotate_chunk(x + b * n, h, n, j0, out + b * n);
    return;
  }
#endif
  // No fused multiply-add in hardware (a separate multiply and add would round twice), or a size below
  // the vector: the chains one output at a time, through fmaf.
  for (; b < blocks; ++b)
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::int64_t i = 0; i < n; ++i) acc = std::fma(x[b * n + i], h[i * n + j], acc);
      out[b * n + j] = acc + 0.0f;
    }
}

void round_to_bf16_run(float* HWY_RESTRICT v, std::int64_t n) {
  // fp8::to_bf16's rounding (to nearest even; a NaN quieted, its low half dropped), widened back.
  const lanes_f32 d;
  const lanes_u32 du;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  for (; i + L <= n; i += L) {
    const auto u = hn::BitCast(du, hn::LoadU(d, v + i));
    const auto rounded = hn::Add(u, hn::Add(hn::Set(du, 0x7FFFu), hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u))));
    const auto quieted = hn::Or(u, hn::Set(du, 0x00400000u));
    const auto nan = hn::Gt(hn::And(u, hn::Set(du, 0x7FFFFFFFu)), hn::Set(du, 0x7F800000u));
    hn::StoreU(hn::BitCast(d, hn::And(hn::IfThenElse(nan, quieted, rounded), hn::Set(du, 0xFFFF0000u))), d, v + i);
  }
  for (; i < n; ++i) v[i] = fp8::from_bf16(fp8::to_bf16(v[i]));
}

std::int64_t non_finite_words_run(const std::uint16_t* HWY_RESTRICT v, std::int64_t n, std::uint16_t exponent) {
  const hn::CappedTag<std::uint16_t, 32> d;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  const auto e = hn::Set(d, exponent);
  std::int64_t bad = 0, i = 0;
  for (; i + L <= n; i += L) bad += static_cast<std::int64_t>(hn::CountTrue(d, hn::Eq(hn::And(hn::LoadU(d, v + i), e), e)));
  for (; i < n; ++i) bad += (v[i] & exponent) == exponent;
  return bad;
}

std::int64_t non_finite_floats_run(const std::uint32_t* HWY_RESTRICT v, std::int64_t n) {
  const lanes_u32 d;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  const auto e = hn::Set(d, 0x7F800000u);
  std::int64_t bad = 0, i = 0;
  for (; i + L <= n; i += L) bad += static_cast<std::int64_t>(hn::CountTrue(d, hn::Eq(hn::And(hn::LoadU(d, v + i), e), e)));
  for (; i < n; ++i) bad += (v[i] & 0x7F800000u) == 0x7F800000u;
  return bad;
}

}  // namespace HWY_NAMESPACE
}  // namespace qpolicy::cpu::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qpolicy::cpu::detail {

HWY_EXPORT(widen_bf16_run);
HWY_EXPORT(widen_f16_run);
HWY_EXPORT(magnitude_bits_f32_run);
HWY_EXPORT(magnitude_bits_bf16_run);
HWY_EXPORT(block_magnitude_bits_run);
HWY_EXPORT(sat_codes_f32_run);
HWY_EXPORT(sat_codes_bf16_run);
HWY_EXPORT(e2m1_codes_run);
HWY_EXPORT(nvfp4_block_scales_run);
HWY_EXPORT(e8m0_block_scales_run);
HWY_EXPORT(int8_codes_run);
HWY_EXPORT(rotate_blocks_run);
HWY_EXPORT(round_to_bf16_run);
HWY_EXPORT(non_finite_words_run);
HWY_EXPORT(non_finite_floats_run);

void widen_bf16_words(const std::uint16_t* in, std::int64_t n, float* out) { QPOLICY_DISPATCH(widen_bf16_run)(in, n, out); }
void widen_f16_words(const std::uint16_t* in, std::int64_t n, float* out) { QPOLICY_DISPATCH(widen_f16_run)(in, n, out); }

std::uint32_t magnitude_bits_f32(const float* v, std::int64_t n, bool* nan) { return QPOLICY_DISPATCH(magnitude_bits_f32_run)(v, n, nan); }

void magnitude_bits_bf16(const std::uint16_t* words, std::int64_t n, std::int64_t width, std::uint16_t* acc, bool* nan) {
  QPOLICY_DISPATCH(magnitude_bits_bf16_run)(words, n, width > 0 ? width : n, acc, nan);
}

void block_magnitude_bits(const float* x, std::int64_t blocks, std::int64_t block, std::uint32_t* finite_or_inf, std::uint32_t* widest) {
  QPOLICY_DISPATCH(block_magnitude_bits_run)(x, blocks, block, finite_or_inf, widest);
}

bool sat_codes_f32(const float* in, std::int64_t n, std::int64_t width, const float* s, bool multiply, std::uint8_t* out, const void* ahead) {
  return QPOLICY_DISPATCH(sat_codes_f32_run)(in, n, width > 0 ? width : n, s, multiply, out, ahead);
}

bool sat_codes_bf16(const std::uint16_t* in, std::int64_t n, std::int64_t width, const float* s, bool multiply, std::uint8_t* out,
                     const void* ahead) {
  return QPOLICY_DISPATCH(sat_codes_bf16_run)(in, n, width > 0 ? width : n, s, multiply, out, ahead);
}

void e2m1_codes(const float* x, std::int64_t blocks, std::int64_t block, const float* multipliers, std::uint8_t* packed) {
  QPOLICY_DISPATCH(e2m1_codes_run)(x, blocks, block, multipliers, packed);
}

void e8m0_block_scales(const std::uint32_t* amax, const std::uint32_t* widest, std::int64_t n, e8m0_scales kind, std::uint8_t* scales,
                       float* multipliers) {
  QPOLICY_DISPATCH(e8m0_block_scales_run)(amax, widest, n, kind, scales, multipliers);
}

bool nvfp4_block_scales(const std::uint32_t* amax, std::int64_t n, float encode, bool zero_if_scale_zero, std::uint8_t* scales,
                        float* multipliers) {
  return QPOLICY_DISPATCH(nvfp4_block_scales_run)(amax, n, encode, zero_if_scale_zero, scales, multipliers);
}

void int8_codes(const float* row, std::int64_t n, float s, model_rounding rounding, std::int8_t* q) {
  QPOLICY_DISPATCH(int8_codes_run)(row, n, s, rounding, q);
}

void rotate_blocks(const float* x, std::int64_t blocks, const float* h, std::int64_t n, float* out) {
  QPOLICY_DISPATCH(rotate_blocks_run)(x, blocks, h, n, out);
}

void round_to_bf16(float* v, std::int64_t n) { QPOLICY_DISPATCH(round_to_bf16_run)(v, n); }

std::int64_t non_finite_words(const std::uint16_t* v, std::int64_t n, std::uint16_t exponent) {
  return QPOLICY_DISPATCH(non_finite_words_run)(v, n, exponent);
}
std::int64_t non_finite_floats(const std::uint32_t* v, std::int64_t n) { return QPOLICY_DISPATCH(non_finite_floats_run)(v, n); }

}  // namespace qpolicy::cpu::detail
#endif  // HWY_ONCE
