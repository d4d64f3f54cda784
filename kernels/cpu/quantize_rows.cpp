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

#include "encode_lanes-inl.h"
#include "hwy_dispatch.hpp"
#include "quantize_rows.hpp"
#include "qpolicy/numerics/detail/quantize_blocks.hpp"

HWY_BEFORE_NAMESPACE();
namespace qpolicy::cpu::detail {
namespace HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

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

template <bool Bf16>
void e2m1_codes_of(const void* HWY_RESTRICT x, std::int64_t blocks, std::int64_t block, const float* HWY_RESTRICT multipliers,
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
      const auto y = hn::Mul(load_lanes<Bf16>(x, c0 + i), hn::Set(d, multipliers[(c0 + i) / block]));
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

void e2m1_codes_run(const float* HWY_RESTRICT x, std::int64_t blocks, std::int64_t block, const float* HWY_RESTRICT multipliers,
                    std::uint8_t* HWY_RESTRICT packed) {
  e2m1_codes_of<false>(x, blocks, block, multipliers, packed);
}

void e2m1_codes_bf16_run(const std::uint16_t* HWY_RESTRICT x, std::int64_t blocks, std::int64_t block, const float* HWY_RESTRICT multipliers,
                         std::uint8_t* HWY_RESTRICT packed) {
  e2m1_codes_of<true>(x, blocks, block, multipliers, packed);
}

template <int Drop, bool Bf16 = false>
void int8_codes_of(const void* HWY_RESTRICT row, std::int64_t n, float s, element type, std::int8_t* HWY_RESTRICT q) {
  const lanes_f32 d;
  const lanes_i32 di;
  const lanes_u32 du;
  const hn::Rebind<std::int8_t, lanes_f32> d8;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  const auto scale = hn::Set(d, s), magic = hn::Set(d, 12582912.0f);
  std::int64_t i = 0;
  for (; i + L <= n; i += L) {
    const auto v = hn::Div(load_lanes<Bf16>(row, i), scale);
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
  for (; i < n; ++i) q[i] = lp::int8_code(type, element_at<Bf16>(row, i), s);
}

void int8_codes_bf16_run(const std::uint16_t* words, std::int64_t n, float s, std::int8_t* q) {
  int8_codes_of<16, true>(words, n, s, element::bf16, q);
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
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::BitCast(d, hn::ShiftLeft<16>(bf16_bits_lanes(hn::LoadU(d, v + i)))), d, v + i);
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
HWY_EXPORT(e2m1_codes_bf16_run);
HWY_EXPORT(int8_codes_run);
HWY_EXPORT(int8_codes_bf16_run);
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

void e2m1_codes_bf16(const std::uint16_t* x, std::int64_t blocks, std::int64_t block, const float* multipliers, std::uint8_t* packed) {
  QPOLICY_DISPATCH(e2m1_codes_bf16_run)(x, blocks, block, multipliers, packed);
}

void e2m1_codes(const float* x, std::int64_t blocks, std::int64_t block, const float* multipliers, std::uint8_t* packed) {
  QPOLICY_DISPATCH(e2m1_codes_run)(x, blocks, block, multipliers, packed);
}

void int8_codes_bf16(const std::uint16_t* words, std::int64_t n, float s, std::int8_t* q) {
  QPOLICY_DISPATCH(int8_codes_bf16_run)(words, n, s, q);
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
