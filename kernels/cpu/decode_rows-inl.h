// Per-target code (Highway; included once per target by the kernel files that decode weights): a run of
// a weight row decoded to float32, every value exactly the one lp::weight_operand gives (or the e4m3 or
// float32 value for the FP8 GEMMs' codes), so that every product the GEMMs form is the same on every
// target (a lone activation row's NVFP4 blocks excepted: lone_row-inl.h). One function per code format;
// a new code format adds one here.
#if defined(QPOLICY_DECODE_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QPOLICY_DECODE_ROWS_INL_H_
#undef QPOLICY_DECODE_ROWS_INL_H_
#else
#define QPOLICY_DECODE_ROWS_INL_H_
#endif

#include <cstdint>
#include <algorithm>
#include <cstring>

#include <hwy/highway.h>

#include "decode_gemm.hpp"
#include "qpolicy/numerics/detail/quantize_blocks.hpp"

HWY_BEFORE_NAMESPACE();
namespace qpolicy::cpu::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// The float32 vectors of the decode kernels: at most 16 lanes, so that a 32-element block is whole vectors.
using float_tag = hn::CappedTag<float, 16>;

/// e4m3fn codes (one per 32-bit lane) as float32, exactly: a normal code's exponent and mantissa moved
/// into a float32's and rebiased (2^-6 .. 448), a subnormal one's mantissa times 2^-9 (no subnormal
/// float32 operand, which costs CPUs a microcode assist), the sign bit copied, and 0x7F/0xFF as NaN of
/// that sign.
template <class DU>
HWY_INLINE hn::Vec<hn::Rebind<float, DU>> e4m3_lanes(DU du, hn::Vec<DU> c) {
  const hn::Rebind<float, DU> df;
  const hn::RebindToSigned<DU> di;
  const auto magnitude = hn::And(c, hn::Set(du, 0x7Fu));
  const auto sign = hn::ShiftLeft<24>(hn::And(c, hn::Set(du, 0x80u)));
  const auto normal = hn::Add(hn::ShiftLeft<20>(magnitude), hn::Set(du, 120u << 23));
  const auto subnormal = hn::BitCast(du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, magnitude)), hn::Set(df, 0x1p-9f)));
  const auto value = hn::IfThenElse(hn::Lt(magnitude, hn::Set(du, 8u)), subnormal, normal);
  const auto nan = hn::Set(du, 0x7FC00000u);
  return hn::BitCast(df, hn::Or(hn::IfThenElse(hn::Eq(magnitude, hn::Set(du, 0x7Fu)), nan, value), sign));
}

// Targets that convert float16 to float32 in hardware (F16C on x86, every arm64 target): e4m3 codes
// then decode as float16 bit patterns (fused_e4m3_one); elsewhere by their fields (e4m3_lanes).
#undef QPOLICY_E4M3_AS_F16
#if HWY_TARGET != HWY_SCALAR && (HWY_ARCH_ARM || (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2))
#define QPOLICY_E4M3_AS_F16 1
#else
#define QPOLICY_E4M3_AS_F16 0
#endif

#if QPOLICY_E4M3_AS_F16
/// The vectors of e4m3 codes decoded as float16 patterns: 16-bit words (a vector's worth of codes, at
/// most 16), their halves as float16 and as float32.
struct e4m3_f16_tags {
  hn::CappedTag<std::uint16_t, 16> words;
  hn::Rebind<std::uint8_t, hn::CappedTag<std::uint16_t, 16>> codes;
  hn::Half<hn::CappedTag<std::uint16_t, 16>> half_words;
  hn::Rebind<hwy::float16_t, hn::Half<hn::CappedTag<std::uint16_t, 16>>> f16;
  hn::Rebind<float, hn::Half<hn::CappedTag<std::uint16_t, 16>>> f32;
};

/// Lanes(tags.words) e4m3 codes as float16 bit patterns: each code's sign and magnitude bits placed as a
/// float16's, whose value is the code's times 2^-8 exactly (subnormals included; a NaN code's pattern is
/// a number: no_e4m3_nan first). The sign lands on bit 14 and moves to bit 15 by adding bit 14 to itself.
template <class DW>
HWY_INLINE hn::Vec<DW> e4m3_f16_patterns(DW dw, const std::uint8_t* codes) {
  const auto bits = hn::ShiftLeft<7>(hn::PromoteTo(dw, hn::LoadU(hn::Rebind<std::uint8_t, DW>(), codes)));
  return hn::Add(bits, hn::And(bits, hn::Set(dw, 0x4000)));
}
HWY_INLINE hn::Vec<hn::CappedTag<std::uint16_t, 16>> e4m3_f16_patterns(const e4m3_f16_tags& tags, const std::uint8_t* codes) {
  return e4m3_f16_patterns(tags.words, codes);
}
/// The lower and upper halves of e4m3_f16_patterns as float32: the codes' values times 2^-8.
HWY_INLINE hn::Vec<decltype(e4m3_f16_tags::f32)> e4m3_f16_lower(const e4m3_f16_tags& tags, hn::Vec<hn::CappedTag<std::uint16_t, 16>> p) {
  return hn::PromoteTo(tags.f32, hn::BitCast(tags.f16, hn::LowerHalf(tags.half_words, p)));
}
HWY_INLINE hn::Vec<decltype(e4m3_f16_tags::f32)> e4m3_f16_upper(const e4m3_f16_tags& tags, hn::Vec<hn::CappedTag<std::uint16_t, 16>> p) {
  return hn::PromoteTo(tags.f32, hn::BitCast(tags.f16, hn::UpperHalf(tags.half_words, p)));
}

/// Whether none of codes[0, count) is an e4m3 NaN (0x7F, 0xFF), which as a float16 pattern is a number.
HWY_INLINE bool no_e4m3_nan(const std::uint8_t* codes, std::int64_t count) {
  const hn::CappedTag<std::uint8_t, 32> d8;
  const std::int64_t step = static_cast<std::int64_t>(hn::Lanes(d8));
  const auto magnitude = hn::Set(d8, 0x7F);
  auto most = hn::Zero(d8);
  std::int64_t t = 0;
  for (; t + step <= count; t += step) most = hn::Max(most, hn::And(hn::LoadU(d8, codes + t), magnitude));
  bool none = hn::AllFalse(d8, hn::Eq(most, magnitude));
  for (; t < count; ++t) none &= (codes[t] & 0x7F) != 0x7F;
  return none;
}

#endif

#if QPOLICY_E4M3_AS_F16
/// e4m3_run by float16 patterns, times 2^8 (exact) and the scale, when no code is a NaN; false (and out
/// unwritten) when one is.
HWY_INLINE bool e4m3_f16_run(const std::uint8_t* codes, std::int64_t count, float scale, float* out) {
  if (!no_e4m3_nan(codes, count)) return false;
  const e4m3_f16_tags tags;
  const std::int64_t step = static_cast<std::int64_t>(hn::Lanes(tags.words)), half = step / 2, whole = count / step * step;
  const auto scale_2_8 = hn::Set(tags.f32, 256.0f), scale_v = hn::Set(tags.f32, scale);
  for (std::int64_t t = 0; t < whole; t += step) {
    const auto pattern = e4m3_f16_patterns(tags, codes + t);
    hn::StoreU(hn::Mul(hn::Mul(e4m3_f16_lower(tags, pattern), scale_2_8), scale_v), tags.f32, out + t);
    hn::StoreU(hn::Mul(hn::Mul(e4m3_f16_upper(tags, pattern), scale_2_8), scale_v), tags.f32, out + t + half);
  }
  for (std::int64_t t = whole; t < count; ++t) out[t] = fp8::decode(codes[t]) * scale;
  return true;
}
#endif

/// out[t] = e4m3 value of codes[t] times `scale` (1: none), t < count (any count). A NaN code's value
/// stays itself whatever the scale (which of two NaN operands a multiply returns is the compiler's
/// choice of operand order).
HWY_INLINE void e4m3_run(const std::uint8_t* codes, std::int64_t count, float scale, float* out) {
#if QPOLICY_E4M3_AS_F16
  if (e4m3_f16_run(codes, count, scale, out)) return;
#endif
  const float_tag df;
  const hn::RebindToUnsigned<float_tag> du;
  const hn::Rebind<std::uint8_t, float_tag> d8;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t t = 0;
  for (; t + L <= count; t += L) {
    const auto value = e4m3_lanes(du, hn::PromoteTo(du, hn::LoadU(d8, codes + t)));
    hn::StoreU(hn::IfThenElse(hn::IsNaN(value), value, hn::Mul(value, hn::Set(df, scale))), df, out + t);
  }
  for (; t < count; ++t) {
    const float value = fp8::decode(codes[t]);
    out[t] = value != value ? value : value * scale;
  }
}

/// out[t] = int8 code t as float32, t < count.
HWY_INLINE void int8_run(const std::uint8_t* codes, std::int64_t count, float* out) {
  const float_tag df;
  const hn::RebindToSigned<float_tag> di;
  const hn::Rebind<std::int8_t, float_tag> d8;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const auto* signed_codes = reinterpret_cast<const std::int8_t*>(codes);
  std::int64_t t = 0;
  for (; t + L <= count; t += L) hn::StoreU(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, signed_codes + t))), df, out + t);
  for (; t < count; ++t) out[t] = static_cast<float>(signed_codes[t]);
}

/// out[0, 2 * pairs) = the e2m1 values of `pairs` packed bytes (element 2j in the low nibble), each
/// times the scale of its `block`-element block, scales[b] for block b. The codes are doubled into
/// integers (0, 1, 2, 3, 4, 6, 8, 12), so each value is the integer times half the scale: the same
/// product, exact, as the value times the scale.
template <std::int64_t Block>
HWY_INLINE void e2m1_run(const std::uint8_t* packed, std::int64_t pairs, const float* scales, float* out) {
#if HWY_TARGET == HWY_SCALAR
  for (std::int64_t t = 0; t < 2 * pairs; ++t)
    out[t] = lp::e2m1_value(t % 2 ? lp::e2m1_high(packed[t / 2]) : lp::e2m1_low(packed[t / 2])) * scales[t / Block];
#else
  const hn::CappedTag<std::uint8_t, 16> d8;
  const hn::CappedTag<std::int8_t, 16> di8;
  const float_tag df;
  const hn::RebindToSigned<float_tag> di;
  const hn::Rebind<std::int8_t, float_tag> dn;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  alignas(64) static constexpr std::int8_t doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  const auto table = hn::LoadU(di8, doubled);
  alignas(32) std::int8_t values[32];
  for (std::int64_t j = 0; j < pairs; j += 16) {  // pairs is a multiple of 8 (16-element blocks)
    const std::int64_t bytes = pairs - j < 16 ? pairs - j : 16;
    std::uint8_t tail[16] = {};
    if (bytes < 16) std::memcpy(tail, packed + j, static_cast<std::size_t>(bytes));
    const auto v = hn::LoadU(d8, bytes < 16 ? tail : packed + j);
    const auto low = hn::And(v, hn::Set(d8, 0x0F)), high = hn::ShiftRight<4>(v);
    const auto first = hn::TableLookupBytes(table, hn::BitCast(di8, hn::InterleaveLower(d8, low, high)));
    const auto second = hn::TableLookupBytes(table, hn::BitCast(di8, hn::InterleaveUpper(d8, low, high)));
    const auto half_scale = [&](std::int64_t at) { return hn::Set(df, scales[at / Block] * 0.5f); };
    float* o = out + 2 * j;
#if HWY_TARGET == HWY_AVX2
    // Eight lanes: each half of a 16-code vector widens straight to a vector of int32.
    if (bytes == 16) {
      const hn::Half<decltype(di8)> dh;
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::LowerHalf(dh, first))), half_scale(2 * j)), df, o);
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::UpperHalf(dh, first))), half_scale(2 * j + 8)), df, o + 8);
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::LowerHalf(dh, second))), half_scale(2 * j + 16)), df, o + 16);
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::UpperHalf(dh, second))), half_scale(2 * j + 24)), df, o + 24);
      continue;
    }
#elif HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    // Sixteen lanes: a 16-code vector widens straight to a vector of int32.
    if (bytes == 16) {
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, first)), half_scale(2 * j)), df, o);
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, second)), half_scale(2 * j + 16)), df, o + 16);
      continue;
    }
#endif
    hn::StoreU(first, di8, values);
    hn::StoreU(second, di8, values + 16);
    for (std::int64_t t = 0; t < 2 * bytes; t += L)
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(dn, values + t))), half_scale(2 * j + t)), df, o + t);
  }
#endif
}

#if HWY_TARGET != HWY_SCALAR
/// The code bytes of a group of e2m1 weights that e2m1_group decodes in registers: at most 32 (64
/// weights), whole 128-bit blocks.
using e2m1_byte_tag = hn::CappedTag<std::uint8_t, 32>;
/// The float32 vectors e2m1_group fills: a quarter of the group's bytes each.
using e2m1_float_tag = hn::Repartition<float, e2m1_byte_tag>;

/// The weights in a group of e2m1_group: two per code byte.
HWY_INLINE std::int64_t e2m1_group_weights() { return 2 * static_cast<std::int64_t>(hn::Lanes(e2m1_byte_tag())); }

/// Which weight of its group lane `lane` of e2m1_group's vector v (0..7) holds. Vector v = 4h + 2u + e
/// comes from the codes' low (h = 0) or high (h = 1) nibbles, the lower (u = 0) or upper (u = 1) halves of
/// each 128-bit block b after the bytes are paired into bf16 words, and their even (e = 0) or odd (e = 1)
/// words; its lane 4b + r holds byte 16b + 8u + 2r + e's nibble h, which is weight 2 * byte + h.
HWY_INLINE std::int64_t e2m1_group_weight(std::int64_t v, std::int64_t lane) {
  const std::int64_t h = v / 4, u = v / 2 % 2, e = v % 2, b = lane / 4, r = lane % 4;
  return 2 * (16 * b + 8 * u + 2 * r + e) + h;
}

/// A scale per 128-bit block of e2m1_group's vectors: lanes [4b, 4b + 4) scales[b * stride] (b < 2).
HWY_INLINE hn::Vec<e2m1_float_tag> block_lanes(const float* scales, std::int64_t stride) {
  const e2m1_float_tag df;
  if constexpr (hn::MaxLanes(df) >= 8) {
    if (hn::Lanes(df) == 8) {
      const hn::Half<e2m1_float_tag> dh;
      return hn::Combine(df, hn::Set(dh, scales[stride]), hn::Set(dh, scales[0]));
    }
  }
  return hn::Set(df, scales[0]);
}

/// The scales of e2m1_group's vectors v with v % 4 < 2 (half u = 0 of each 128-bit block) and v % 4 >= 2
/// (u = 1), from the scales of the group's Block-element blocks: a 128-bit block of codes is one MX
/// block, or two NVFP4 blocks (its halves).
template <std::int64_t Block>
HWY_INLINE hn::Vec<e2m1_float_tag> e2m1_half_scales(const float* scales, int u) {
  return Block == 32 ? block_lanes(scales, 1) : block_lanes(scales + u, 2);
}

/// The e2m1_group_weights() weights of packed e2m1 codes (element 2j in byte j's low nibble) as their
/// F4 values in float32, in eight vectors, visit(v, values) for v = 0..7, in e2m1_group_weight's order
/// (their block scales: e2m1_half_scales). Each F4 value is a bf16 (two table lookups give its bytes), so
/// the bytes paired into 16-bit words are the high halves of the float32 values: no conversion from
/// integers.
template <class Visit>
HWY_INLINE void e2m1_group(const std::uint8_t* HWY_RESTRICT packed, Visit&& visit) {
  const e2m1_byte_tag d8;
  const hn::Repartition<std::uint16_t, e2m1_byte_tag> d16;
  const hn::Repartition<std::uint32_t, e2m1_byte_tag> du;
  const e2m1_float_tag df;
  // F4(0..15) as bf16: low bytes, then high bytes.
  alignas(16) static constexpr std::uint8_t low_bytes[16] = {0, 0, 0x80, 0xC0, 0, 0x40, 0x80, 0xC0, 0, 0, 0x80, 0xC0, 0, 0x40, 0x80, 0xC0};
  alignas(16) static constexpr std::uint8_t high_bytes[16] = {0,    0x3F, 0x3F, 0x3F, 0x40, 0x40, 0x40, 0x40,
                                                              0x80, 0xBF, 0xBF, 0xBF, 0xC0, 0xC0, 0xC0, 0xC0};
  const auto low_table = hn::LoadDup128(d8, low_bytes), high_table = hn::LoadDup128(d8, high_bytes);
  const auto bytes = hn::LoadU(d8, packed);
  const auto nibble_mask = hn::Set(d8, 0x0F);
  const auto high_words = hn::Set(du, 0xFFFF0000u);
  const auto words = [&](int v, hn::Vec<decltype(du)> pairs) {
    visit(v, hn::BitCast(df, hn::ShiftLeft<16>(pairs)));
    visit(v + 1, hn::BitCast(df, hn::And(pairs, high_words)));
  };
  const auto nibbles = [&](int v, hn::Vec<e2m1_byte_tag> codes) {
    const auto low = hn::TableLookupBytes(low_table, codes), high = hn::TableLookupBytes(high_table, codes);
    words(v, hn::BitCast(du, hn::InterleaveLower(d8, low, high)));
    words(v + 2, hn::BitCast(du, hn::InterleaveUpper(d8, low, high)));
  };
  nibbles(0, hn::And(bytes, nibble_mask));
  nibbles(4, hn::And(hn::BitCast(d8, hn::ShiftRight<4>(hn::BitCast(d16, bytes))), nibble_mask));
}
#endif

/// out[0, count) = elements [k0, k0 + count) of row n of LUT-B weights (count and k0 multiples of 64):
/// each tile's eight values F8(codebook) * E8(scale), looked up by the 3-bit indices, 8 from 3 bytes.
HWY_INLINE void lut3_run(const float* e4m3_table, const std::uint8_t* packed, const std::uint8_t* books, const std::uint8_t* scales, std::int64_t cols,
                         std::int64_t n, std::int64_t k0, std::int64_t count, float* out) {
  const std::int64_t tiles_per_row = cols / lp::lut_cols, r = n % lp::lut_rows;
  for (std::int64_t k = k0; k < k0 + count; k += lp::lut_cols) {
    const std::int64_t tile = (n / lp::lut_rows) * tiles_per_row + k / lp::lut_cols;
    const std::uint8_t* codes = packed + tile * lp::lut_packed_bytes + r * (lp::lut_cols * 3 / 8);
    alignas(64) float book[16] = {};
    const float scale = lp::e8m0_value(scales[tile]);
    for (int e = 0; e < lp::lut_entries; ++e) book[e] = e4m3_table[books[tile * lp::lut_entries + e]] * scale;
    float* o = out + (k - k0);
#if HWY_TARGET == HWY_SCALAR
    for (int g = 0; g < lp::lut_cols / 8; ++g) {
      const std::uint32_t word = codes[g * 3] | std::uint32_t{codes[g * 3 + 1]} << 8 | std::uint32_t{codes[g * 3 + 2]} << 16;
      for (int j = 0; j < 8; ++j) o[g * 8 + j] = book[word >> (3 * j) & 7u];
    }
#else
    const hn::CappedTag<float, 8> d8f;  // 8 lanes where the target has them (NEON: 4)
    const hn::RebindToUnsigned<decltype(d8f)> du;
    const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d8f));
    alignas(32) static constexpr std::uint32_t lane_shift[8] = {0, 3, 6, 9, 12, 15, 18, 21};
    if (L == 8) {
      const auto values = hn::LoadU(d8f, book);
      const auto shifts = hn::LoadU(du, lane_shift);
      for (int g = 0; g < lp::lut_cols / 8; ++g) {
        const std::uint32_t word = codes[g * 3] | std::uint32_t{codes[g * 3 + 1]} << 8 | std::uint32_t{codes[g * 3 + 2]} << 16;
        const auto index = hn::And(hn::Shr(hn::Set(du, word), shifts), hn::Set(du, 7u));
        hn::StoreU(hn::TableLookupLanes(values, hn::IndicesFromVec(d8f, hn::BitCast(hn::RebindToSigned<decltype(d8f)>(), index))), d8f,
                   o + g * 8);
      }
    } else {
      const hn::RebindToSigned<decltype(d8f)> di;
      for (int g = 0; g < lp::lut_cols / 8; ++g) {
        const std::uint32_t word = codes[g * 3] | std::uint32_t{codes[g * 3 + 1]} << 8 | std::uint32_t{codes[g * 3 + 2]} << 16;
        for (std::int64_t h = 0; h < 8; h += L) {
          const auto index = hn::And(hn::Shr(hn::Set(du, word), hn::LoadU(du, lane_shift + h)), hn::Set(du, 7u));
          hn::StoreU(hn::GatherIndex(d8f, book, hn::BitCast(di, index)), d8f, o + g * 8 + h);
        }
      }
    }
#endif
  }
}

/// Elements [k0, k0 + count) of row n of `w` as float32: a pointer into the weights (float32), or into
/// `buffer`, which the decode fills. Block formats take k0 and count on block boundaries.
HWY_INLINE const float* decode_run(const code_rows& w, std::int64_t n, std::int64_t k0, std::int64_t count, float* buffer) {
  const auto* codes = static_cast<const std::uint8_t*>(w.codes);
  const float* e4m3_table = e4m3_values().data();
  switch (w.format) {
    case row_format::f32: return static_cast<const float*>(w.codes) + n * w.k + k0;
    case row_format::e4m3: e4m3_run(codes + n * w.k + k0, count, 1.0f, buffer); return buffer;
    case row_format::int8: int8_run(codes + n * w.k + k0, count, buffer); return buffer;
    case row_format::e4m3_e8m0:
      for (std::int64_t b = 0; b < count; b += lp::mx_block) {
        const std::uint8_t s = w.scales[n * (w.k / lp::mx_block) + (k0 + b) / lp::mx_block];
        if (s == 0) std::fill(buffer + b, buffer + b + lp::mx_block, 0.0f);  // Marlin: byte 0 decodes the block as 0, NaN codes too
        else e4m3_run(codes + n * w.k + k0 + b, lp::mx_block, lp::e8m0_value(s), buffer + b);
      }
      return buffer;
    case row_format::e2m1_e8m0: {
      float scales[decode_chunk / lp::mx_block];
      const std::uint8_t* bytes = w.scales + n * (w.k / lp::mx_block) + k0 / lp::mx_block;
      for (std::int64_t b = 0; b < count / lp::mx_block; ++b) scales[b] = lp::e8m0_value(bytes[b]);
      e2m1_run<lp::mx_block>(codes + (n * w.k + k0) / 2, count / 2, scales, buffer);
      return buffer;
    }
    case row_format::e2m1_e4m3: {
      float scales[decode_chunk / lp::nv_block];
      const std::uint8_t* bytes = w.scales + n * (w.k / lp::nv_block) + k0 / lp::nv_block;
      for (std::int64_t b = 0; b < count / lp::nv_block; ++b) scales[b] = e4m3_table[bytes[b]];
      e2m1_run<lp::nv_block>(codes + (n * w.k + k0) / 2, count / 2, scales, buffer);
      return buffer;
    }
    case row_format::lut3: lut3_run(e4m3_table, codes, w.books, w.scales, w.k, n, k0, count, buffer); return buffer;
  }
  return buffer;
}

}  // namespace HWY_NAMESPACE
}  // namespace qpolicy::cpu::detail
HWY_AFTER_NAMESPACE();

#endif  // include guard toggled per target
