// The block scales of the MX formats (E8M0) and of NVFP4 (e4m3) in portable SIMD (quantize_rows.hpp):
// compiled once per target of the platform, the implementation of the active CPU target called through
// QPOLICY_DISPATCH. Each lane computes the scalar formulas' byte and the codes' multiplier from a block's
// amax bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/block_scales.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>

#include "decode_rows-inl.h"
#include "encode_lanes-inl.h"
#include "hwy_dispatch.hpp"
#include "quantize_rows.hpp"
#include "qpolicy/numerics/detail/quantize_blocks.hpp"

HWY_BEFORE_NAMESPACE();
namespace qpolicy::cpu::detail {
namespace HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

/// The three E8M0 roundings of the MX formats.
enum class e8m0_rule { ceil, round_up, even };

/// E8M0 bytes per lane from positive float32 values (or zero, infinity, NaN), each rule's bits as
/// numerics/block_formats.hpp's scalar function computes them:
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

}  // namespace

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
  // One vector of blocks; the last, partial one through zero-padded copies (a padded lane's result is
  // dropped).
  const auto blocks = [&](const std::uint32_t* a_at, const std::uint32_t* w_at, std::uint8_t* s_at, float* m_at) {
    const auto a = hn::BitCast(d, hn::LoadU(du, a_at));  // NaN-ignoring
    hn::Vec<lanes_i32> b;
    hn::Vec<lanes_f32> m;
    switch (kind) {
      case e8m0_scales::mxfp8_torch: {
        // CEIL of max(amax, 2^-126) / 448; a block with a NaN: byte 0 and a (positive) NaN multiplier.
        const auto nan = hn::RebindMask(d, hn::Gt(hn::LoadU(du, w_at), hn::Set(du, 0x7F800000u)));
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
    hn::StoreU(hn::DemoteTo(d8, b), d8, s_at);
    hn::StoreU(m, d, m_at);
  };
  std::int64_t j = 0;
  for (; j + L <= n; j += L) blocks(amax + j, widest ? widest + j : amax + j, scales + j, multipliers + j);
  if (j < n) {
    alignas(64) std::uint32_t a_pad[16] = {}, w_pad[16] = {};
    alignas(64) std::uint8_t s_pad[16];
    alignas(64) float m_pad[16];
    std::copy(amax + j, amax + n, a_pad);
    std::copy(widest ? widest + j : amax + j, widest ? widest + n : amax + n, w_pad);
    blocks(a_pad, w_pad, s_pad, m_pad);
    std::copy(s_pad, s_pad + (n - j), scales + j);
    std::copy(m_pad, m_pad + (n - j), multipliers + j);
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
  // One vector of blocks; the last, partial one through zero-padded copies (a padded lane's result is
  // dropped; its NaN, an infinite encode scale times 0, only sends the caller to the block functions).
  const auto blocks = [&](const std::uint32_t* a_at, std::uint8_t* s_at, float* m_at) {
    const auto a = hn::BitCast(d, hn::LoadU(du, a_at));
    const auto t = hn::Mul(by, hn::Mul(a, sixth));
    nan = hn::Or(nan, hn::VecFromMask(di, hn::RebindMask(di, hn::IsNaN(t))));
    const auto code = e4m3_code_bytes(t);
    hn::StoreU(code, d8, s_at);
    const auto scale = e4m3_lanes(du, hn::PromoteTo(du, code));
    const auto zero = zero_if_scale_zero ? hn::Eq(scale, hn::Zero(d)) : hn::Eq(a, hn::Zero(d));
    hn::StoreU(hn::IfThenZeroElse(zero, hn::Div(hn::Set(d, 1.0f), hn::Mul(scale, decode))), d, m_at);
  };
  std::int64_t j = 0;
  for (; j + L <= n; j += L) blocks(amax + j, scales + j, multipliers + j);
  if (j < n) {
    alignas(64) std::uint32_t a_pad[16] = {};
    alignas(64) std::uint8_t s_pad[16];
    alignas(64) float m_pad[16];
    std::copy(amax + j, amax + n, a_pad);
    blocks(a_pad, s_pad, m_pad);
    std::copy(s_pad, s_pad + (n - j), scales + j);
    std::copy(m_pad, m_pad + (n - j), multipliers + j);
  }
  return hn::AllFalse(di, hn::Ne(nan, hn::Zero(di)));
}

}  // namespace HWY_NAMESPACE
}  // namespace qpolicy::cpu::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qpolicy::cpu::detail {

HWY_EXPORT(e8m0_block_scales_run);
HWY_EXPORT(nvfp4_block_scales_run);

void e8m0_block_scales(const std::uint32_t* amax, const std::uint32_t* widest, std::int64_t n, e8m0_scales kind, std::uint8_t* scales,
                       float* multipliers) {
  QPOLICY_DISPATCH(e8m0_block_scales_run)(amax, widest, n, kind, scales, multipliers);
}

bool nvfp4_block_scales(const std::uint32_t* amax, std::int64_t n, float encode, bool zero_if_scale_zero, std::uint8_t* scales,
                        float* multipliers) {
  return QPOLICY_DISPATCH(nvfp4_block_scales_run)(amax, n, encode, zero_if_scale_zero, scales, multipliers);
}

}  // namespace qpolicy::cpu::detail
#endif  // HWY_ONCE
