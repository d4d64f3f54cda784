// Per-target code (Highway; included once per target by decode_gemm.cpp): the decode-batch GEMM's lone
// activation row (M = 1, a decode step's usual batch), whose dot products with each weight row decode the
// codes in registers and multiply them at once (fused_dot_one). A decoded run stored and reloaded, as
// more rows of x share it, costs a lone row more than its multiply-adds. Where a code format's cheapest
// decode gives its values in another order or scale, the row is rearranged or scaled once for every
// weight row (prepare_lone_row), so each product stays the one decode_run's values give.
#if defined(QPOLICY_LONE_ROW_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QPOLICY_LONE_ROW_INL_H_
#undef QPOLICY_LONE_ROW_INL_H_
#else
#define QPOLICY_LONE_ROW_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <hwy/highway.h>

#include "decode_rows-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qpolicy::cpu::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// Whether row format f's fused decode reads the activation row as prepare_lone_row leaves it.
HWY_INLINE bool reads_prepared_row(row_format f) {
  switch (f) {
    case row_format::e2m1_e8m0:
    case row_format::e2m1_e4m3: return HWY_TARGET != HWY_SCALAR;
    case row_format::e4m3:
    case row_format::e4m3_e8m0: return QPOLICY_E4M3_AS_F16 != 0;
    default: return false;
  }
}

/// The activation row x[0, k) as row format f's fused decode reads it (reads_prepared_row): e2m1 weights,
/// each whole group of e2m1_group_weights() elements in the order e2m1_group decodes a group (the elements
/// past the last whole group as they are); e4m3 weights, times 2^8 (their float16 patterns are their
/// values times 2^-8). Both then sum products that are the same as x times the weights' values, scaled
/// by a power of two, while those stay normal floats: false (and out unfinished) where a finite value of
/// x is nonzero and below 2^-100 or at least 2^100 in magnitude.
HWY_INLINE bool prepare_lone_row(row_format f, const float* HWY_RESTRICT x, std::int64_t k, float* HWY_RESTRICT out) {
  for (std::int64_t t = 0; t < k; ++t) {
    const float a = std::abs(x[t]);
    if (a != 0.0f && (a < 0x1p-100f || (a >= 0x1p100f && a != std::numeric_limits<float>::infinity()))) return false;
  }
  if (f == row_format::e4m3 || f == row_format::e4m3_e8m0) {
    for (std::int64_t t = 0; t < k; ++t) out[t] = x[t] * 256.0f;
    return true;
  }
  std::int64_t g = 0;
#if HWY_TARGET != HWY_SCALAR
  const std::int64_t group = e2m1_group_weights(), lanes = group / 8;
  for (; g + group <= k; g += group)
    for (std::int64_t v = 0; v < 8; ++v)
      for (std::int64_t lane = 0; lane < lanes; ++lane) out[g + v * lanes + lane] = x[g + e2m1_group_weight(v, lane)];
#endif
  std::copy(x + g, x + k, out + g);
  return true;
}

#if HWY_TARGET != HWY_SCALAR
/// fused_dot_one for e2m1 weights with Block-element blocks, on the row's chunk in e2m1_group_order: each
/// decoded vector multiplies the activations it pairs with as they are loaded. The products are x times
/// F4 (exact for bf16 x), summed per half of a 128-bit block of codes and then multiplied by that half's
/// block scale: a power of two for MXFP4 (the same sums as x times F4 times the scale), an e4m3 value for
/// NVFP4 (one more rounding per block, which low-precision §9's bound takes).
template <std::int64_t Block>
HWY_INLINE void fused_e2m1_one(const code_rows& w, std::int64_t n, std::int64_t k0, std::int64_t count, const float* HWY_RESTRICT x_groups,
                               float* HWY_RESTRICT acc) {
  const e2m1_float_tag df;
  const std::int64_t group = e2m1_group_weights(), lanes = group / 8, whole = count / group * group;
  const std::uint8_t* packed = static_cast<const std::uint8_t*>(w.codes) + (n * w.k + k0) / 2;
  const std::uint8_t* scale_bytes = w.scales + n * (w.k / Block) + k0 / Block;
  float scales[decode_chunk / Block];
  if constexpr (Block == lp::mx_block) {
    for (std::int64_t b = 0; b < count / Block; ++b) scales[b] = lp::e8m0_value(scale_bytes[b]);
  } else {
    const float* e4m3_table = e4m3_values().data();
    for (std::int64_t b = 0; b < count / Block; ++b) scales[b] = e4m3_table[scale_bytes[b]];
  }
  auto a0 = hn::Zero(df), a1 = hn::Zero(df);  // the scaled sums of the halves u = 0 and u = 1
  for (std::int64_t g = 0; g < whole; g += group) {
    // Four chains of multiply-adds: a group's eight take two steps of each.
    auto p0 = hn::Zero(df), p1 = hn::Zero(df), p2 = hn::Zero(df), p3 = hn::Zero(df);
    e2m1_group(packed + g / 2, [&](int v, hn::Vec<e2m1_float_tag> values) {
      const auto xv = hn::LoadU(df, x_groups + g + v * lanes);
      switch (v % 4) {
        case 0: p0 = hn::MulAdd(xv, values, p0); break;
        case 1: p1 = hn::MulAdd(xv, values, p1); break;
        case 2: p2 = hn::MulAdd(xv, values, p2); break;
        default: p3 = hn::MulAdd(xv, values, p3); break;
      }
    });
    a0 = hn::MulAdd(hn::Add(p0, p1), e2m1_half_scales<Block>(scales + g / Block, 0), a0);
    a1 = hn::MulAdd(hn::Add(p2, p3), e2m1_half_scales<Block>(scales + g / Block, 1), a1);
  }
  hn::StoreU(hn::Add(hn::LoadU(df, acc), hn::Add(a0, a1)), df, acc);
  if (whole == count) return;
  // Less than a group left (K past its last whole group): decoded to a run, in the activations' order.
  alignas(64) float tail[decode_chunk];
  e2m1_run<Block>(packed + whole / 2, (count - whole) / 2, scales + whole / Block, tail);
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(float_tag()));
  for (std::int64_t t = 0; t < count - whole; ++t) acc[t % L] += x_groups[whole + t] * tail[t];
}
#endif

#if QPOLICY_E4M3_AS_F16
/// fused_dot_one for e4m3 codes (Block = 0: no block scales; 32: MXFP8's E8M0 scales, byte 0 decoding
/// the block as 0 as Marlin does), on the row's chunk times 2^8 (prepare_lone_row), when the chunk holds
/// no NaN code: each code's sign and magnitude bits placed as a float16's are its value times 2^-8
/// exactly (subnormals included), converted by the hardware; each product is then x times the value,
/// exactly the one decode_run's gives, and each block's sum is multiplied by its power-of-two scale.
template <std::int64_t Block>
HWY_INLINE bool fused_e4m3_one(const code_rows& w, std::int64_t n, std::int64_t k0, std::int64_t count, const float* HWY_RESTRICT x_scaled,
                               float* HWY_RESTRICT acc) {
  const std::uint8_t* codes = static_cast<const std::uint8_t*>(w.codes) + n * w.k + k0;
  if (!no_e4m3_nan(codes, count)) return false;
  const e4m3_f16_tags tags;
  const auto df = tags.f32;
  const std::int64_t step = static_cast<std::int64_t>(hn::Lanes(tags.words)), half = step / 2;
  // acc lanes += x * value over [t0, t1), two chains each of the low and high halves of each step.
  auto a0 = hn::Zero(df), a1 = hn::Zero(df);
  const auto products = [&](std::int64_t t0, std::int64_t t1, auto& s0, auto& s1) {
    for (std::int64_t t = t0; t < t1; t += step) {
      const auto pattern = e4m3_f16_patterns(tags, codes + t);
      s0 = hn::MulAdd(hn::LoadU(df, x_scaled + t), e4m3_f16_lower(tags, pattern), s0);
      s1 = hn::MulAdd(hn::LoadU(df, x_scaled + t + half), e4m3_f16_upper(tags, pattern), s1);
    }
  };
  const std::int64_t whole = count / step * step;
  if constexpr (Block == 0) {
    auto a2 = hn::Zero(df), a3 = hn::Zero(df);
    std::int64_t t = 0;
    for (; t + 2 * step <= whole; t += 2 * step) products(t, t + step, a0, a1), products(t + step, t + 2 * step, a2, a3);
    products(t, whole, a0, a1);
    a0 = hn::Add(a0, a2), a1 = hn::Add(a1, a3);
  } else {
    static_assert(Block == lp::mx_block, "e4m3 codes have no block scales, or MXFP8's per 32");
    for (std::int64_t b = 0; b < whole; b += Block) {  // whole blocks: step divides them
      const std::uint8_t s = w.scales[n * (w.k / Block) + (k0 + b) / Block];
      auto p0 = hn::Zero(df), p1 = hn::Zero(df);
      products(b, b + Block, p0, p1);
      const auto scale = hn::Set(df, s == 0 ? 0.0f : lp::e8m0_value(s));
      a0 = hn::MulAdd(p0, scale, a0), a1 = hn::MulAdd(p1, scale, a1);
    }
  }
  hn::StoreU(hn::Add(hn::LoadU(df, acc), hn::Add(a0, a1)), df, acc);
  const float* e4m3_table = e4m3_values().data();
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(float_tag()));
  for (std::int64_t t = whole; t < count; ++t) acc[t % L] += x_scaled[t] * 0x1p-8f * e4m3_table[codes[t]];  // per-tensor codes only
  return true;
}
#endif

#if HWY_TARGET != HWY_SCALAR
/// fused_dot_one for LUT-B's tiles (whole tiles: k0 and count multiples of 64): lut3_run's lookups of
/// each tile's eight values, eight lanes at a time, multiplied as they are made. false: the target has
/// fewer than eight float32 lanes (NEON), where the lookups gather.
HWY_INLINE bool fused_lut3_one(const code_rows& w, std::int64_t n, std::int64_t k0, std::int64_t count, const float* HWY_RESTRICT x,
                               float* HWY_RESTRICT acc) {
  const hn::CappedTag<float, 8> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  if (hn::Lanes(df) != 8) return false;
  alignas(32) static constexpr std::uint32_t lane_shift[8] = {0, 3, 6, 9, 12, 15, 18, 21};
  const auto shifts = hn::LoadU(du, lane_shift);
  const auto index_mask = hn::Set(du, 7u);
  const float* e4m3_table = e4m3_values().data();
  const auto* packed = static_cast<const std::uint8_t*>(w.codes);
  const std::int64_t tiles_per_row = w.k / lp::lut_cols, r = n % lp::lut_rows;
  auto a0 = hn::Zero(df), a1 = hn::Zero(df);
  for (std::int64_t k = k0; k < k0 + count; k += lp::lut_cols) {
    const std::int64_t tile = (n / lp::lut_rows) * tiles_per_row + k / lp::lut_cols;
    const std::uint8_t* codes = packed + tile * lp::lut_packed_bytes + r * (lp::lut_cols * 3 / 8);
    const float scale = lp::e8m0_value(w.scales[tile]);
    const std::uint8_t* entries = w.books + tile * lp::lut_entries;
    // The tile's eight values F8(codebook) * E8(scale): as float16 patterns times 2^8 (exact) and the
    // scale where no entry is a NaN code (a byte whose low seven bits are all set), else from the table.
    const auto values = [&] {
#if QPOLICY_E4M3_AS_F16
      std::uint64_t bytes;
      std::memcpy(&bytes, entries, 8);
      if ((((bytes & 0x7F7F7F7F7F7F7F7Full) + 0x0101010101010101ull) & 0x8080808080808080ull) == 0) {
        const auto pattern = e4m3_f16_patterns(hn::Rebind<std::uint16_t, decltype(df)>(), entries);
        const auto value = hn::PromoteTo(df, hn::BitCast(hn::Rebind<hwy::float16_t, decltype(df)>(), pattern));
        return hn::Mul(hn::Mul(value, hn::Set(df, 256.0f)), hn::Set(df, scale));
      }
#endif
      alignas(32) float book[8];
      for (int e = 0; e < lp::lut_entries; ++e) book[e] = e4m3_table[entries[e]] * scale;
      return hn::Load(df, book);
    }();
    const float* xs = x + (k - k0);
    for (int g = 0; g < lp::lut_cols / 8; ++g) {
      // Group g's eight indices are bits [24g, 24g + 24) of the row's 24 bytes: a 4-byte load at byte 3g
      // (the last group's ends at the run's end).
      std::uint32_t word;
      std::memcpy(&word, codes + (g < 7 ? 3 * g : 20), 4);
      if (g == 7) word >>= 8;
      const auto index = hn::And(hn::Shr(hn::Set(du, word), shifts), index_mask);
      const auto wv = hn::TableLookupLanes(values, hn::IndicesFromVec(df, hn::BitCast(di, index)));
      if (g % 2 == 0) a0 = hn::MulAdd(hn::LoadU(df, xs + 8 * g), wv, a0);
      else a1 = hn::MulAdd(hn::LoadU(df, xs + 8 * g), wv, a1);
    }
  }
  hn::StoreU(hn::Add(hn::LoadU(df, acc), hn::Add(a0, a1)), df, acc);
  return true;
}
#endif

/// acc[0, L) += the products x[t] w[t], t < count, of one activation row and elements [k0, k0 + count)
/// of weight row n, decoded in registers; the lanes' sums (in some lane each). `prepared` is the row's
/// chunk as prepare_lone_row leaves it, or null (its values out of that range). false: row n's format
/// (or, without `prepared`, this chunk) has no fused decode, and acc is unchanged.
HWY_INLINE bool fused_dot_one(const code_rows& w, std::int64_t n, std::int64_t k0, std::int64_t count, const float* HWY_RESTRICT x,
                              const float* HWY_RESTRICT prepared, float* HWY_RESTRICT acc) {
#if HWY_TARGET == HWY_SCALAR
  (void)w, (void)n, (void)k0, (void)count, (void)x, (void)prepared, (void)acc;
  return false;
#else
  const float_tag d;
  const hn::RebindToUnsigned<float_tag> du;
  const hn::Rebind<std::uint8_t, float_tag> d8;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  const auto* codes = static_cast<const std::uint8_t*>(w.codes);
  const auto e4m3_at = [&](const std::uint8_t* c) { return e4m3_lanes(du, hn::PromoteTo(du, hn::LoadU(d8, c))); };
  auto a0 = hn::LoadU(d, acc), a1 = hn::Zero(d);
  switch (w.format) {
    case row_format::e4m3: {
#if QPOLICY_E4M3_AS_F16
      if (prepared && fused_e4m3_one<0>(w, n, k0, count, prepared, acc)) return true;
#endif
      const std::uint8_t* c = codes + n * w.k + k0;
      const std::int64_t whole = count / L * L;
      std::int64_t t = 0;
      for (; t + 2 * L <= whole; t += 2 * L) {
        a0 = hn::MulAdd(hn::LoadU(d, x + t), e4m3_at(c + t), a0);
        a1 = hn::MulAdd(hn::LoadU(d, x + t + L), e4m3_at(c + t + L), a1);
      }
      if (t < whole) a0 = hn::MulAdd(hn::LoadU(d, x + t), e4m3_at(c + t), a0);
      hn::StoreU(hn::Add(a0, a1), d, acc);
      const float* e4m3_table = e4m3_values().data();
      for (t = whole; t < count; ++t) acc[t - whole] += x[t] * e4m3_table[c[t]];
      return true;
    }
    case row_format::e4m3_e8m0: {  // whole 32-element blocks: L divides them
#if QPOLICY_E4M3_AS_F16
      if (prepared && fused_e4m3_one<lp::mx_block>(w, n, k0, count, prepared, acc)) return true;
#endif
      for (std::int64_t b = 0; b < count; b += lp::mx_block) {
        const std::uint8_t s = w.scales[n * (w.k / lp::mx_block) + (k0 + b) / lp::mx_block];
        const std::uint8_t* c = codes + n * w.k + k0 + b;
        // Marlin: byte 0 decodes the block as 0, NaN codes too (the products x * 0 stay, as decode_run's).
        const auto scale = hn::Set(d, s == 0 ? 0.0f : lp::e8m0_value(s));
        for (std::int64_t t = 0; t < lp::mx_block; t += 2 * L) {
          const auto w0 = s == 0 ? hn::Zero(d) : hn::Mul(e4m3_at(c + t), scale);
          const auto w1 = s == 0 ? hn::Zero(d) : hn::Mul(e4m3_at(c + t + L), scale);
          a0 = hn::MulAdd(hn::LoadU(d, x + b + t), w0, a0);
          a1 = hn::MulAdd(hn::LoadU(d, x + b + t + L), w1, a1);
        }
      }
      hn::StoreU(hn::Add(a0, a1), d, acc);
      return true;
    }
    case row_format::int8: {
      const hn::RebindToSigned<float_tag> di;
      const hn::Rebind<std::int8_t, float_tag> di8;
      const auto* c = reinterpret_cast<const std::int8_t*>(codes + n * w.k + k0);
      const auto value_at = [&](std::int64_t t) { return hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(di8, c + t))); };
      auto a2 = hn::Zero(d), a3 = hn::Zero(d);
      const std::int64_t whole = count / L * L;
      std::int64_t t = 0;
      for (; t + 4 * L <= whole; t += 4 * L) {
        a0 = hn::MulAdd(hn::LoadU(d, x + t), value_at(t), a0);
        a1 = hn::MulAdd(hn::LoadU(d, x + t + L), value_at(t + L), a1);
        a2 = hn::MulAdd(hn::LoadU(d, x + t + 2 * L), value_at(t + 2 * L), a2);
        a3 = hn::MulAdd(hn::LoadU(d, x + t + 3 * L), value_at(t + 3 * L), a3);
      }
      for (; t < whole; t += L) a0 = hn::MulAdd(hn::LoadU(d, x + t), value_at(t), a0);
      hn::StoreU(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), d, acc);
      for (t = whole; t < count; ++t) acc[t - whole] += x[t] * static_cast<float>(c[t]);
      return true;
    }
    case row_format::e2m1_e8m0:
      if (!prepared) return false;
      fused_e2m1_one<lp::mx_block>(w, n, k0, count, prepared, acc);
      return true;
    case row_format::e2m1_e4m3:
      if (!prepared) return false;
      fused_e2m1_one<lp::nv_block>(w, n, k0, count, prepared, acc);
      return true;
    case row_format::lut3: return fused_lut3_one(w, n, k0, count, x, acc);
    case row_format::f32: return false;
  }
  return false;
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace qpolicy::cpu::detail
HWY_AFTER_NAMESPACE();

#endif  // include guard toggled per target
