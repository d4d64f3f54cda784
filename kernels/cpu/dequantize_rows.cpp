// The decoder of stored tensors (cpu::dequantize) in portable SIMD: a run of codes sharing one scale, each
// code's value times the scale, rounded to the output type, exactly as fp8::decode, lp::e2m1_value,
// fp8::to_bf16 and lp::to_fp16 give it. Compiled once per target of the platform; cpu_target.cpp says
// which one runs.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/dequantize_rows.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "decode_rows-inl.h"
#include "encode_lanes-inl.h"

#include <algorithm>
#include <cstring>

#include "dequantize_rows.hpp"
#include "hwy_dispatch.hpp"
#include "qpolicy/numerics/block_formats.hpp"

HWY_BEFORE_NAMESPACE();
namespace qpolicy::cpu::detail {
namespace HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

/// The values of `pairs` packed e2m1 bytes (element 2j in byte j's low nibble) times s: each nibble's
/// doubled magnitude (an integer) from a byte table, halved (exact), its sign bit set from the nibble's
/// (so code 8 is -0, as lp::e2m1_value gives it), then multiplied by s.
void e2m1_values(const std::uint8_t* packed, std::int64_t pairs, float s, float* out) {
#if HWY_TARGET == HWY_SCALAR
  for (std::int64_t j = 0; j < pairs; ++j) {
    out[2 * j] = lp::e2m1_value(lp::e2m1_low(packed[j])) * s;
    out[2 * j + 1] = lp::e2m1_value(lp::e2m1_high(packed[j])) * s;
  }
#else
  const hn::CappedTag<std::uint8_t, 16> d8;
  const float_tag df;
  const hn::RebindToSigned<float_tag> di;
  const hn::RebindToUnsigned<float_tag> du;
  const hn::Rebind<std::uint8_t, float_tag> dn;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df)), B = static_cast<std::int64_t>(hn::Lanes(d8));
  alignas(64) static constexpr std::uint8_t doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12};
  const auto table = hn::LoadU(d8, doubled);
  alignas(64) std::uint8_t nibbles[32], magnitudes[32];
  for (std::int64_t j = 0; j < pairs; j += B) {
    const std::int64_t bytes = std::min(B, pairs - j);
    alignas(16) std::uint8_t staged[16] = {};
    std::memcpy(staged, packed + j, static_cast<std::size_t>(bytes));
    const auto v = hn::LoadU(d8, staged);
    const auto low = hn::And(v, hn::Set(d8, 0x0F)), high = hn::ShiftRight<4>(v);
    const auto first = hn::InterleaveLower(d8, low, high), second = hn::InterleaveUpper(d8, low, high);
    hn::StoreU(first, d8, nibbles);
    hn::StoreU(second, d8, nibbles + B);
    hn::StoreU(hn::TableLookupBytes(table, first), d8, magnitudes);
    hn::StoreU(hn::TableLookupBytes(table, second), d8, magnitudes + B);
    float* o = out + 2 * j;
    std::int64_t t = 0;
    for (; t + L <= 2 * bytes; t += L) {
      const auto magnitude = hn::Mul(hn::ConvertTo(df, hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(dn, magnitudes + t)))), hn::Set(df, 0.5f));
      const auto sign = hn::ShiftLeft<28>(hn::And(hn::PromoteTo(du, hn::LoadU(dn, nibbles + t)), hn::Set(du, 8u)));
      hn::StoreU(hn::Mul(hn::BitCast(df, hn::Or(hn::BitCast(du, magnitude), sign)), hn::Set(df, s)), df, o + t);
    }
    for (; t < 2 * bytes; ++t) o[t] = lp::e2m1_value(nibbles[t]) * s;
  }
#endif
}

/// out[i] = to_bf16(v[i]), i < n: to nearest even; a NaN quieted with its low half dropped.
void store_bf16(const float* v, std::int64_t n, std::uint16_t* out) {
  const float_tag d;
  const hn::Rebind<std::uint16_t, float_tag> d16;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  for (; i + L <= n; i += L)
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(hn::RebindToSigned<float_tag>(), bf16_bits_lanes(hn::LoadU(d, v + i)))), d16, out + i);
  for (; i < n; ++i) out[i] = fp8::to_bf16(v[i]);
}

/// out[i] = lp::to_fp16(v[i]), i < n: the hardware's conversion where the target has one (to nearest
/// even, overflow to infinity), a NaN then set to sign | 0x7E00 as to_fp16 sets it; elsewhere to_fp16.
void store_f16(const float* v, std::int64_t n, std::uint16_t* out) {
  std::int64_t i = 0;
#if !(HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3)
  const float_tag d;
  const hn::Rebind<hwy::float16_t, float_tag> dh;
  const hn::Rebind<std::uint16_t, float_tag> d16;
  const hn::Rebind<std::int16_t, float_tag> di16;
  const hn::RebindToSigned<float_tag> di;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  for (; i + L <= n; i += L) {
    const auto x = hn::LoadU(d, v + i);
    const auto half = hn::BitCast(d16, hn::DemoteTo(dh, x));
    const auto nan = hn::BitCast(d16, hn::DemoteTo(di16, hn::VecFromMask(di, hn::RebindMask(di, hn::IsNaN(x)))));
    const auto quiet = hn::Or(hn::And(half, hn::Set(d16, 0x8000u)), hn::Set(d16, 0x7E00u));
    hn::StoreU(hn::IfThenElse(hn::MaskFromVec(nan), quiet, half), d16, out + i);
  }
#endif
  for (; i < n; ++i) out[i] = lp::to_fp16(v[i]);
}

}  // namespace

void dequantize_range(schemes::code_format format, const std::uint8_t* codes, std::int64_t first, std::int64_t n, float s, element type,
                      void* out) {
  const float_tag d;
  constexpr std::int64_t chunk = 512;
  alignas(64) float values[chunk];
  for (std::int64_t c = 0; c < n; c += chunk) {
    const std::int64_t count = std::min(chunk, n - c);
    float* v = type == element::f32 ? static_cast<float*>(out) + c : values;
    switch (format) {
      case schemes::code_format::e4m3: e4m3_run(codes + first + c, count, s, v); break;
      case schemes::code_format::int8: {
        int8_run(codes + first + c, count, v);
        const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
        std::int64_t t = 0;
        for (; t + L <= count; t += L) hn::StoreU(hn::Mul(hn::LoadU(d, v + t), hn::Set(d, s)), d, v + t);
        for (; t < count; ++t) v[t] *= s;
        break;
      }
      case schemes::code_format::e2m1_packed: e2m1_values(codes + (first + c) / 2, count / 2, s, v); break;
      case schemes::code_format::lut3_tiles: break;  // decoded by tiles (lut_b_dequantize), never here
    }
    if (type == element::bf16) store_bf16(v, count, static_cast<std::uint16_t*>(out) + c);
    else if (type == element::f16) store_f16(v, count, static_cast<std::uint16_t*>(out) + c);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace qpolicy::cpu::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qpolicy::cpu::detail {

HWY_EXPORT(dequantize_range);

void dequantize_run(schemes::code_format format, const std::uint8_t* codes, std::int64_t first, std::int64_t n, float s, element type,
                    void* out) {
  QPOLICY_DISPATCH(dequantize_range)(format, codes, first, n, s, type, out);
}

}  // namespace qpolicy::cpu::detail
#endif  // HWY_ONCE
