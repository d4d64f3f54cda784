// LUT-B's tile fit (lut_b_tile.hpp, new-schemes §B.3) for as many tiles at once as a vector has float32
// lanes (at most 16), one tile per lane: every lane runs lp::lut_b_tile's float32 operations in the same
// order, its branches as masks, so each tile gets lut_b_tile's bits. The scalar fit is bound by its
// element-order centroid sums (each an add on a sum just stored) and its sort's branches; lane by lane,
// the sums are the tiles' masked adds and the sort a branch-free network.
//
// Where a lane's order of operations cannot be the scalar one, the tile takes lut_b_tile: a NaN or an
// infinity (unspecified inputs, §B.3, whose comparisons a network would order differently), or both
// signed zeros (a network sorts equal values in any order, the scalar merge sort keeps theirs: the
// quantile init could pick the other zero). Elsewhere equal values are the same bits, so any sort of
// them gives the same sequence.
//
// The fit keeps arrays of vectors and masks, which scalable vectors (SVE) cannot form: arm64 runs the
// NEON build of this file (Grace's SVE vectors are 128 bits, as NEON's).
#ifndef QPOLICY_HWY_UNUSED_TARGETS
#define QPOLICY_HWY_UNUSED_TARGETS 0  // a build outside meson.build (the libFuzzer and device scripts) compiles them all
#endif
#undef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (QPOLICY_HWY_UNUSED_TARGETS | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/lut_b_fit.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "hwy_dispatch.hpp"
#include "lut_b_fit.hpp"
#include "qpolicy/numerics/detail/lut_b_tile.hpp"
#include "qpolicy/numerics/numerics.hpp"

HWY_BEFORE_NAMESPACE();
namespace qpolicy::cpu::detail {
namespace HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int elements = lp::lut_elements;  // 512
constexpr int entries = lp::lut_entries;    // 8

using lanes_f32 = hn::CappedTag<float, lut_fit_max_lanes>;
using lanes_i32 = hn::RebindToSigned<lanes_f32>;
using vec = hn::Vec<lanes_f32>;
using ivec = hn::Vec<lanes_i32>;
using mask = hn::Mask<lanes_f32>;

/// A tile's eight centres, lane by lane. Its special members are written out so that they carry the
/// target's attributes (GCC generates implicit ones without them, and then cannot inline the vector's).
struct centres {
  vec c[entries];
  HWY_ATTR centres() {}
  HWY_ATTR centres(const centres& other) { std::copy(std::begin(other.c), std::end(other.c), std::begin(c)); }
  HWY_ATTR centres& operator=(const centres& other) {
    std::copy(std::begin(other.c), std::end(other.c), std::begin(c));
    return *this;
  }
};

/// Register i of a lane-major array (element i of every lane).
HWY_INLINE vec at(const float* v, int i) { return hn::Load(lanes_f32(), v + i * static_cast<int>(hn::Lanes(lanes_f32()))); }
HWY_INLINE void put(float* v, int i, vec x) { hn::Store(x, lanes_f32(), v + i * static_cast<int>(hn::Lanes(lanes_f32()))); }

/// lp::lut_snap lane by lane: clamped to ±448, then rounded to nearest even on e4m3's grid, 2^(e - 3)
/// for magnitudes in [2^e, 2^(e+1)) and 2^-9 below 2^-6 (the subnormals). Scaling by powers of two is
/// exact, so the one rounding is Round's; a negative value that rounds to zero stays -0, as the cast's.
HWY_INLINE vec snap(vec c) {
  const lanes_f32 d;
  const lanes_i32 di;
  c = hn::Min(hn::Max(c, hn::Set(d, -fp8::max_e4m3)), hn::Set(d, fp8::max_e4m3));
  const auto magnitude = hn::And(hn::BitCast(di, c), hn::Set(di, 0x7FFFFFFF));
  const auto exponent = hn::Max(hn::Sub(hn::ShiftRight<23>(magnitude), hn::Set(di, 127)), hn::Set(di, -6));
  const auto up = hn::BitCast(d, hn::ShiftLeft<23>(hn::Sub(hn::Set(di, 130), exponent)));    // 2^(3 - e)
  const auto down = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(exponent, hn::Set(di, 124))));  // 2^(e - 3)
  return hn::Mul(hn::Round(hn::Mul(c, up)), down);
}

/// lp::lut_normalize lane by lane: snap, the first centre of smallest magnitude set to +0 where
/// `preserve_zero`, then an odd-even transposition sort that swaps neighbours only when strictly out of
/// order: stable, so the same sequence as the insertion sort.
HWY_INLINE void normalize(centres& s, mask preserve_zero) {
  const lanes_f32 d;
  const lanes_i32 di;
  for (auto& c : s.c) c = snap(c);
  vec smallest = hn::Abs(s.c[0]);
  ivec zero = hn::Zero(di);
  for (int k = 1; k < entries; ++k) {
    const vec a = hn::Abs(s.c[k]);
    const mask less = hn::Lt(a, smallest);
    smallest = hn::IfThenElse(less, a, smallest);
    zero = hn::IfThenElse(hn::RebindMask(di, less), hn::Set(di, k), zero);
  }
  for (int k = 0; k < entries; ++k)
    s.c[k] = hn::IfThenElse(hn::And(preserve_zero, hn::RebindMask(d, hn::Eq(zero, hn::Set(di, k)))), hn::Zero(d), s.c[k]);
  for (int round = 0; round < entries; ++round)
    for (int j = 1 + round % 2; j < entries; j += 2) {
      const mask swap = hn::Lt(s.c[j], s.c[j - 1]);
      const vec t = s.c[j];
      s.c[j] = hn::IfThenElse(swap, s.c[j - 1], s.c[j]);
      s.c[j - 1] = hn::IfThenElse(swap, t, s.c[j - 1]);
    }
}

/// lp::lut_boundaries lane by lane.
HWY_INLINE void boundaries(const centres& s, vec (&b)[entries - 1]) {
  for (int k = 0; k + 1 < entries; ++k) b[k] = hn::Mul(hn::Add(s.c[k], s.c[k + 1]), hn::Set(lanes_f32(), 0.5f));
}

/// Each lane's cluster of value v (lp::lut_assign: the boundaries below v; they are ascending, so those
/// below v are the first idx ones): in[k] the lanes whose v is in cluster k.
HWY_INLINE void clusters(const vec (&b)[entries - 1], vec v, mask (&in)[entries]) {
  const lanes_f32 d;
  mask below = hn::FirstN(d, hn::Lanes(d));  // lanes whose v is above boundary k - 1
  for (int k = 0; k < entries; ++k) {
    const mask above = k + 1 < entries ? hn::Lt(b[k], v) : hn::FirstN(d, 0);
    in[k] = hn::AndNot(above, below);
    below = above;
  }
}

/// lp::torch_sum_512 lane by lane: the same cascade for each lane's 512 values.
HWY_INLINE vec torch_sum(const float* x) {
  const lanes_f32 d;
  vec sum = hn::Zero(d);
  for (int l = 0; l < 8; ++l) {
    vec a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
    for (int i = 0; i < 16; ++i) {
      a0 = hn::Add(a0, at(x, (4 * i + 0) * 8 + l));
      a1 = hn::Add(a1, at(x, (4 * i + 1) * 8 + l));
      a2 = hn::Add(a2, at(x, (4 * i + 2) * 8 + l));
      a3 = hn::Add(a3, at(x, (4 * i + 3) * 8 + l));
    }
    sum = hn::Add(sum, hn::Add(hn::Add(hn::Add(a0, a1), a2), a3));
  }
  return sum;
}

/// Sorts each lane's 512 values ascending (a bitonic network of lane minima and maxima).
void sort_lanes(float* s) {
  for (int size = 2; size <= elements; size *= 2)
    for (int stride = size / 2; stride > 0; stride /= 2)
      for (int i = 0; i < elements; ++i) {
        const int j = i ^ stride;
        if (j < i) continue;
        const vec a = at(s, i), b = at(s, j);
        const vec low = hn::Min(a, b), high = hn::Max(a, b);
        const bool ascending = (i & size) == 0;
        put(s, i, ascending ? low : high);
        put(s, j, ascending ? high : low);
      }
}

/// lp::lut_init's farthest-point init lane by lane (`distance`: 512 registers of scratch).
void farthest(const float* v, float* distance, centres& s) {
  const lanes_f32 d;
  s.c[0] = hn::Div(torch_sum(v), hn::Set(d, static_cast<float>(elements)));
  for (int i = 0; i < elements; ++i) {
    const vec e = hn::Sub(at(v, i), s.c[0]);
    put(distance, i, hn::Mul(e, e));
  }
  for (int k = 1; k < entries; ++k) {
    vec far = at(distance, 0), value = at(v, 0);
    for (int i = 1; i < elements; ++i) {  // argmax: the first index of the maximum
      const vec di = at(distance, i);
      const mask more = hn::Gt(di, far);
      far = hn::IfThenElse(more, di, far);
      value = hn::IfThenElse(more, at(v, i), value);
    }
    s.c[k] = value;
    for (int i = 0; i < elements; ++i) {
      const vec e = hn::Sub(at(v, i), value), ee = hn::Mul(e, e), old = at(distance, i);
      put(distance, i, hn::IfThenElse(hn::Lt(ee, old), ee, old));
    }
  }
}

/// One Lloyd iteration lane by lane: the centroid sums in element order (scatter_add's), each centre
/// with members replaced by its sum / count, then normalized. With mask registers (AVX-512) a member adds
/// to its sum and its count (float32: whole numbers up to 512, exact) by one masked add each; with masks
/// as vectors, the count (int32) subtracts the mask (-1).
void iterate(const float* v, centres& s, mask preserve_zero) {
  const lanes_f32 d;
  vec b[entries - 1];
  boundaries(s, b);
  vec sums[entries], counts[entries];
  for (int k = 0; k < entries; ++k) sums[k] = hn::Zero(d), counts[k] = hn::Zero(d);
  for (int i = 0; i < elements; ++i) {
    const vec x = at(v, i);
    mask in[entries];
    clusters(b, x, in);
    for (int k = 0; k < entries; ++k) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
      sums[k] = hn::IfThenElse(in[k], hn::Add(sums[k], x), sums[k]);
      counts[k] = hn::IfThenElse(in[k], hn::Add(counts[k], hn::Set(d, 1.0f)), counts[k]);
#else
      const lanes_i32 di;
      sums[k] = hn::IfThenElse(in[k], hn::Add(sums[k], x), sums[k]);
      counts[k] = hn::BitCast(d, hn::Sub(hn::BitCast(di, counts[k]), hn::VecFromMask(di, hn::RebindMask(di, in[k]))));
#endif
    }
  }
  for (int k = 0; k < entries; ++k) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    const vec count = counts[k];
#else
    const vec count = hn::ConvertTo(d, hn::BitCast(lanes_i32(), counts[k]));
#endif
    s.c[k] = hn::IfThenElse(hn::Gt(count, hn::Zero(d)), hn::Div(sums[k], count), s.c[k]);
  }
  normalize(s, preserve_zero);
}

/// The loss of centres s lane by lane: torch_sum of (c[idx] - v)^2 (`squares`: 512 registers of scratch).
vec loss(const float* v, const centres& s, float* squares) {
  vec b[entries - 1];
  boundaries(s, b);
  for (int i = 0; i < elements; ++i) {
    const vec x = at(v, i);
    mask in[entries];
    clusters(b, x, in);
    vec centre = s.c[0];
    for (int k = 1; k < entries; ++k) centre = hn::IfThenElse(in[k], s.c[k], centre);
    const vec e = hn::Sub(centre, x);
    put(squares, i, hn::Mul(e, e));
  }
  return torch_sum(squares);
}

/// lp::lut_fit lane by lane, up to the best init's centres: the three inits in order, 16 Lloyd
/// iterations each (fewer once they stop moving), the loss of each, the strictly smaller replacing.
centres fit_lanes(const float* v, float* work, mask preserve_zero) {
  const lanes_f32 d;
  const lanes_i32 di;
  const int L = static_cast<int>(hn::Lanes(d));
  // The inits' order statistics: the sorted values' ranks 0, 511 and 32, 96, ..., 480.
  std::memcpy(work, v, sizeof(float) * static_cast<std::size_t>(elements * L));
  sort_lanes(work);
  vec quantile[entries];
  for (int k = 0; k < entries; ++k) quantile[k] = at(work, (2 * k + 1) * (elements / entries) / 2);
  const vec low = at(work, 0), high = at(work, elements - 1);
  centres best{};
  for (auto& c : best.c) c = hn::Zero(d);
  vec best_loss = hn::Set(d, fp8::float_of(0x7F800000u));
  mask have_best = hn::FirstN(d, 0);
  for (int which = 0; which < 3; ++which) {
    centres s;
    if (which == 0) {
      farthest(v, work, s);
    } else if (which == 1) {
      for (int k = 0; k < entries; ++k) s.c[k] = quantile[k];
    } else {
      const float step = 1.0f / 7.0f;
      for (int k = 0; k < entries; ++k) {
        const float fraction = k < entries / 2 ? step * static_cast<float>(k) : 1.0f - step * static_cast<float>(entries - 1 - k);
        s.c[k] = hn::Add(low, hn::Mul(hn::Sub(high, low), hn::Set(d, fraction)));
      }
    }
    normalize(s, preserve_zero);
    // An iteration is a function of the centres alone: once it leaves every lane's centres as they
    // were (bit for bit), the rest would too.
    for (int it = 0; it < lp::lut_iterations; ++it) {
      const centres before = s;
      iterate(v, s, preserve_zero);
      bool moved = false;
      for (int k = 0; k < entries; ++k) moved |= !hn::AllTrue(di, hn::Eq(hn::BitCast(di, s.c[k]), hn::BitCast(di, before.c[k])));
      if (!moved) break;
    }
    const vec l = loss(v, s, work);
    // Strictly smaller replaces (ties keep the earlier init); the last init is taken if none was.
    const mask take = which == 2 ? hn::Or(hn::Lt(l, best_loss), hn::Not(have_best)) : hn::Lt(l, best_loss);
    best_loss = hn::IfThenElse(take, l, best_loss);
    for (int k = 0; k < entries; ++k) best.c[k] = hn::IfThenElse(take, s.c[k], best.c[k]);
    have_best = hn::Or(have_best, take);
  }
  return best;
}

}  // namespace

std::uint32_t lut_b_fit_range(const float* tiles, int count, float* scratch, std::uint8_t* scales, float* book, std::uint8_t* indices) {
  const lanes_f32 d;
  const lanes_i32 di;
  const hn::Rebind<std::uint8_t, lanes_f32> d8;
  const int L = static_cast<int>(hn::Lanes(d));
  float* v = scratch;
  float* work = v + elements * L;
  // Tiles [0, count) into lanes (lane j: tile j, the last tile again past count) as v' = v * 2^-e, and
  // each tile's scale byte e + 127, as lut_b_tile computes them.
  alignas(64) float lane_amax[lut_fit_max_lanes] = {}, lane_normalize[lut_fit_max_lanes] = {};
  for (int i = 0; i < elements; ++i)
    for (int j = 0; j < L; ++j) {
      const float x = tiles[std::min(j, count - 1) * elements + i];
      v[i * L + j] = x;
      lane_amax[j] = fp8::max_nan(lane_amax[j], fp8::abs_f32(x));
    }
  for (int j = 0; j < count; ++j) {
    const float a = fp8::max_nan(lane_amax[j], fp8::float_of(0x00800000u));
    scales[j] = lp::e8m0_ceil(a / fp8::max_e4m3);
    lane_normalize[j] = 1.0f / lp::e8m0_value(scales[j]);
  }
  for (int j = count; j < L; ++j) lane_normalize[j] = lane_normalize[count - 1];
  const vec normalize_by = hn::Load(d, lane_normalize);
  ivec zero = hn::Zero(di), positive_zero = hn::Zero(di), negative_zero = hn::Zero(di), not_finite = hn::Zero(di);
  const auto exponent = hn::Set(di, 0x7F800000);
  for (int i = 0; i < elements; ++i) {
    const vec x = hn::Mul(at(v, i), normalize_by);
    put(v, i, x);
    const ivec bits = hn::BitCast(di, x);
    zero = hn::Or(zero, hn::VecFromMask(di, hn::Eq(hn::And(bits, hn::Set(di, 0x7FFFFFFF)), hn::Zero(di))));
    positive_zero = hn::Or(positive_zero, hn::VecFromMask(di, hn::Eq(bits, hn::Zero(di))));
    negative_zero = hn::Or(negative_zero, hn::VecFromMask(di, hn::Eq(bits, hn::Set(di, static_cast<std::int32_t>(0x80000000u)))));
    not_finite = hn::Or(not_finite, hn::VecFromMask(di, hn::Eq(hn::And(bits, exponent), exponent)));
  }
  const mask preserve_zero = hn::RebindMask(d, hn::MaskFromVec(zero));
  const centres best = fit_lanes(v, work, preserve_zero);
  // Each lane's indices under the best centres (indices[L i + j]: element i of lane j) and codebook.
  vec b[entries - 1];
  boundaries(best, b);
  for (int i = 0; i < elements; ++i) {
    mask in[entries];
    clusters(b, at(v, i), in);
    ivec index = hn::Zero(di);
    for (int k = 1; k < entries; ++k) index = hn::IfThenElse(hn::RebindMask(di, in[k]), hn::Set(di, k), index);
    hn::StoreU(hn::DemoteTo(d8, index), d8, indices + i * L);
  }
  for (int k = 0; k < entries; ++k) hn::StoreU(best.c[k], d, book + k * L);
  // The lanes lut_b_tile takes: a NaN or an infinity, or both signed zeros.
  alignas(64) std::int32_t special[lut_fit_max_lanes];
  hn::Store(hn::Or(not_finite, hn::And(positive_zero, negative_zero)), di, special);
  std::uint32_t scalar = 0;
  for (int j = 0; j < L; ++j) scalar |= special[j] ? 1u << j : 0u;
  return scalar;
}

int lut_b_fit_lanes_of() { return static_cast<int>(hn::Lanes(lanes_f32())); }

}  // namespace HWY_NAMESPACE
}  // namespace qpolicy::cpu::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qpolicy::cpu::detail {

HWY_EXPORT(lut_b_fit_range);
HWY_EXPORT(lut_b_fit_lanes_of);

int lut_b_fit_lanes() { return QPOLICY_DISPATCH(lut_b_fit_lanes_of)(); }

void lut_b_fit_tiles(const float* tiles, int count, float* scratch, lp::lut_scratch& scalar, std::uint8_t* packed, std::uint8_t* codebooks,
                     std::uint8_t* scales) {
  const int lanes = lut_b_fit_lanes();
  alignas(64) float book[lp::lut_entries * lut_fit_max_lanes];
  std::uint8_t* indices = reinterpret_cast<std::uint8_t*>(scratch + 2 * lp::lut_elements * lanes);  // [element][lane]
  const std::uint32_t special = QPOLICY_DISPATCH(lut_b_fit_range)(tiles, count, scratch, scales, book, indices);
  std::uint8_t tile_indices[lp::lut_elements];
  for (int j = 0; j < count; ++j) {
    std::uint8_t* tile_packed = packed + j * lp::lut_packed_bytes;
    std::uint8_t* tile_book = codebooks + j * lp::lut_entries;
    if (special >> j & 1u) {
      float tile[lp::lut_elements];
      std::copy_n(tiles + j * lp::lut_elements, lp::lut_elements, tile);
      scales[j] = lp::lut_b_tile(tile, scalar, tile_packed, tile_book);
      continue;
    }
    for (int i = 0; i < lp::lut_elements; ++i) tile_indices[i] = indices[lanes * i + j];
    lp::lut_pack(tile_indices, tile_packed);
    for (int k = 0; k < lp::lut_entries; ++k) tile_book[k] = fp8::tcvt(book[k * lanes + j]);
  }
}

}  // namespace qpolicy::cpu::detail
#endif  // HWY_ONCE
