// Per-target code (Highway; included once per target by the quantizer files): the lane types of the
// quantizers' passes and their element encoders, each lane exactly the scalar formula's value.
#if defined(QPOLICY_ENCODE_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QPOLICY_ENCODE_LANES_INL_H_
#undef QPOLICY_ENCODE_LANES_INL_H_
#else
#define QPOLICY_ENCODE_LANES_INL_H_
#endif

#include <cstdint>

#include <hwy/highway.h>

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

/// fp8::to_bf16 per lane, as the bf16 bits in the low half of uint32 lanes: to nearest even; a NaN
/// quieted, its low half dropped.
HWY_INLINE hn::Vec<lanes_u32> bf16_bits_lanes(hn::Vec<lanes_f32> v) {
  const lanes_u32 du;
  const auto u = hn::BitCast(du, v);
  const auto rounded = hn::Add(u, hn::Add(hn::Set(du, 0x7FFFu), hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u))));
  const auto quieted = hn::Or(u, hn::Set(du, 0x00400000u));
  const auto nan = hn::Gt(hn::And(u, hn::Set(du, 0x7FFFFFFFu)), hn::Set(du, 0x7F800000u));
  return hn::ShiftRight<16>(hn::IfThenElse(nan, quieted, rounded));
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace qpolicy::cpu::detail
HWY_AFTER_NAMESPACE();

#endif  // include guard toggled per target
