// LUT-B's tile fit (lut_b_tile.hpp, new-schemes §B.3) for sixteen tiles at once, one tile per lane of
// the AVX-512 registers: every lane runs lp::lut_b_tile's float32 operations in the same order, its
// branches as masks, so each tile gets lut_b_tile's bits. The scalar fit is bound by its element-order
// centroid sums (each an add on a sum just stored) and its sort's branches; lane by lane, the sums are
// sixteen tiles' masked adds and the sort a branch-free network.
//
// Where a lane's order of operations cannot be the scalar one, the tile takes lut_b_tile: a NaN or an
// infinity (unspecified inputs, §B.3, whose comparisons a network would order differently), or both
// signed zeros (a network sorts equal values in any order, the scalar merge sort keeps theirs: the
// quantile init could pick the other zero). Elsewhere equal values are the same bits, so any sort of
// them gives the same sequence.
#include "low_precision_rows.hpp"

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>

#include <algorithm>

#include "qpolicy/numerics/detail/lut_b_tile.hpp"
#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::cpu::rows {

// GCC 12's intrinsic headers build some results from an "undefined" register (see e4m3_avx512.hpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {

constexpr int elements = lp::lut_elements;  // 512
constexpr int entries = lp::lut_entries;    // 8

/// A tile's eight centres, lane by lane.
struct centres {
  __m512 c[entries];
};

/// lp::lut_snap lane by lane: clamped to ±448, then rounded to nearest even on e4m3's grid, 2^(e - 3)
/// for magnitudes in [2^e, 2^(e+1)) and 2^-9 below 2^-6 (the subnormals). Scaling by powers of two is
/// exact, so the one rounding is the cast's; a negative value that rounds to zero stays -0, as the cast's.
QPOLICY_AVX512_F16C inline __m512 snap(__m512 c) {
  c = _mm512_min_ps(_mm512_max_ps(c, _mm512_set1_ps(-fp8::max_e4m3)), _mm512_set1_ps(fp8::max_e4m3));
  const __m512i magnitude = _mm512_and_si512(_mm512_castps_si512(c), _mm512_set1_epi32(0x7FFFFFFF));
  const __m512i exponent = _mm512_max_epi32(_mm512_sub_epi32(_mm512_srli_epi32(magnitude, 23), _mm512_set1_epi32(127)), _mm512_set1_epi32(-6));
  const __m512 up = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(130), exponent), 23));    // 2^(3 - e)
  const __m512 down = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(exponent, _mm512_set1_epi32(124)), 23));  // 2^(e - 3)
  return _mm512_mul_ps(_mm512_roundscale_ps(_mm512_mul_ps(c, up), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), down);
}

/// lp::lut_normalize lane by lane: snap, the first centre of smallest magnitude set to +0 where
/// `preserve_zero`, then an odd-even transposition sort that swaps neighbours only when strictly out of
/// order: stable, so the same sequence as the insertion sort.
QPOLICY_AVX512_F16C inline void normalize(centres& s, __mmask16 preserve_zero) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (auto& c : s.c) c = snap(c);
  __m512 smallest = _mm512_andnot_ps(sign, s.c[0]);
  __m512i zero = _mm512_setzero_si512();
  for (int k = 1; k < entries; ++k) {
    const __m512 a = _mm512_andnot_ps(sign, s.c[k]);
    const __mmask16 less = _mm512_cmp_ps_mask(a, smallest, _CMP_LT_OQ);
    smallest = _mm512_mask_mov_ps(smallest, less, a);
    zero = _mm512_mask_mov_epi32(zero, less, _mm512_set1_epi32(k));
  }
  for (int k = 0; k < entries; ++k)
    s.c[k] = _mm512_mask_mov_ps(s.c[k], preserve_zero & _mm512_cmpeq_epi32_mask(zero, _mm512_set1_epi32(k)), _mm512_setzero_ps());
  for (int round = 0; round < entries; ++round)
    for (int j = 1 + round % 2; j < entries; j += 2) {
      const __mmask16 swap = _mm512_cmp_ps_mask(s.c[j], s.c[j - 1], _CMP_LT_OQ);
      const __m512 t = s.c[j];
      s.c[j] = _mm512_mask_mov_ps(s.c[j], swap, s.c[j - 1]);
      s.c[j - 1] = _mm512_mask_mov_ps(s.c[j - 1], swap, t);
    }
}

/// lp::lut_boundaries lane by lane.
QPOLICY_AVX512_F16C inline void boundaries(const centres& s, __m512 (&b)[entries - 1]) {
  for (int k = 0; k + 1 < entries; ++k) b[k] = _mm512_mul_ps(_mm512_add_ps(s.c[k], s.c[k + 1]), _mm512_set1_ps(0.5f));
}

/// Each lane's cluster of value v (lp::lut_assign: the boundaries below v; they are ascending, so those
/// below v are the first idx ones): in[k] the lanes whose v is in cluster k.
QPOLICY_AVX512_F16C inline void clusters(const __m512 (&b)[entries - 1], __m512 v, __mmask16 (&in)[entries]) {
  __mmask16 below = 0xFFFF;  // lanes whose v is above boundary k - 1
  for (int k = 0; k < entries; ++k) {
    const __mmask16 above = k + 1 < entries ? _mm512_cmp_ps_mask(b[k], v, _CMP_LT_OQ) : __mmask16{0};
    in[k] = static_cast<__mmask16>(below & ~above);
    below = above;
  }
}

/// lp::torch_sum_512 lane by lane: the same cascade for each lane's 512 values.
QPOLICY_AVX512_F16C inline __m512 torch_sum(const __m512* x) {
  __m512 sum = _mm512_setzero_ps();
  for (int l = 0; l < 8; ++l) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int i = 0; i < 16; ++i)
      for (int k = 0; k < 4; ++k) acc[k] = _mm512_add_ps(acc[k], x[(4 * i + k) * 8 + l]);
    sum = _mm512_add_ps(sum, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), acc[2]), acc[3]));
  }
  return sum;
}

/// Sorts each lane's 512 values ascending (a bitonic network of lane minima and maxima).
QPOLICY_AVX512_F16C void sort_lanes(__m512* s) {
  for (int size = 2; size <= elements; size *= 2)
    for (int stride = size / 2; stride > 0; stride /= 2)
      for (int i = 0; i < elements; ++i) {
        const int j = i ^ stride;
        if (j < i) continue;
        const __m512 low = _mm512_min_ps(s[i], s[j]), high = _mm512_max_ps(s[i], s[j]);
        const bool ascending = (i & size) == 0;
        s[i] = ascending ? low : high;
        s[j] = ascending ? high : low;
      }
}

/// lp::lut_init's farthest-point init lane by lane (`distance`: 512 registers of scratch).
QPOLICY_AVX512_F16C void farthest(const __m512* v, __m512* distance, centres& s) {
  s.c[0] = _mm512_div_ps(torch_sum(v), _mm512_set1_ps(static_cast<float>(elements)));
  for (int i = 0; i < elements; ++i) {
    const __m512 d = _mm512_sub_ps(v[i], s.c[0]);
    distance[i] = _mm512_mul_ps(d, d);
  }
  for (int k = 1; k < entries; ++k) {
    __m512 far = distance[0], value = v[0];
    for (int i = 1; i < elements; ++i) {  // argmax: the first index of the maximum
      const __mmask16 more = _mm512_cmp_ps_mask(distance[i], far, _CMP_GT_OQ);
      far = _mm512_mask_mov_ps(far, more, distance[i]);
      value = _mm512_mask_mov_ps(value, more, v[i]);
    }
    s.c[k] = value;
    for (int i = 0; i < elements; ++i) {
      const __m512 d = _mm512_sub_ps(v[i], value), dd = _mm512_mul_ps(d, d);
      distance[i] = _mm512_mask_mov_ps(distance[i], _mm512_cmp_ps_mask(dd, distance[i], _CMP_LT_OQ), dd);
    }
  }
}

/// One Lloyd iteration lane by lane: the centroid sums in element order (scatter_add's), each centre
/// with members replaced by its sum / count, then normalized.
QPOLICY_AVX512_F16C void iterate(const __m512* v, centres& s, __mmask16 preserve_zero) {
  __m512 b[entries - 1];
  boundaries(s, b);
  __m512 sums[entries];
  __m512i counts[entries];
  for (int k = 0; k < entries; ++k) sums[k] = _mm512_setzero_ps(), counts[k] = _mm512_setzero_si512();
  const __m512i one = _mm512_set1_epi32(1);
  for (int i = 0; i < elements; ++i) {
    __mmask16 in[entries];
    clusters(b, v[i], in);
    for (int k = 0; k < entries; ++k) {
      sums[k] = _mm512_mask_add_ps(sums[k], in[k], sums[k], v[i]);
      counts[k] = _mm512_mask_add_epi32(counts[k], in[k], counts[k], one);
    }
  }
  for (int k = 0; k < entries; ++k) {
    const __mmask16 members = _mm512_cmpgt_epi32_mask(counts[k], _mm512_setzero_si512());
    s.c[k] = _mm512_mask_div_ps(s.c[k], members, sums[k], _mm512_cvtepi32_ps(counts[k]));
  }
  normalize(s, preserve_zero);
}

/// The loss of centres s lane by lane: torch_sum of (c[idx] - v)^2 (`squares`: 512 registers of scratch).
QPOLICY_AVX512_F16C __m512 loss(const __m512* v, const centres& s, __m512* squares) {
  __m512 b[entries - 1];
  boundaries(s, b);
  for (int i = 0; i < elements; ++i) {
    __mmask16 in[entries];
    clusters(b, v[i], in);
    __m512 centre = s.c[0];
    for (int k = 1; k < entries; ++k) centre = _mm512_mask_mov_ps(centre, in[k], s.c[k]);
    const __m512 d = _mm512_sub_ps(centre, v[i]);
    squares[i] = _mm512_mul_ps(d, d);
  }
  return torch_sum(squares);
}

/// What normalize_lanes found in each lane's v'.
struct lane_masks {
  __mmask16 zero;     // lanes holding an exact zero (preserve_zero)
  __mmask16 scalar;   // lanes that lut_b_tile takes: a NaN, an infinity, or both signed zeros
};

/// Tiles [0, count) into lanes (lane j: tile j, the last tile again past count) as v' = v * 2^-e, and
/// each tile's scale byte e + 127, as lut_b_tile computes them.
QPOLICY_AVX512_F16C lane_masks normalize_lanes(const float* tiles, int count, __m512* v, std::uint8_t* scales) {
  alignas(64) std::int32_t offsets[16];
  for (int j = 0; j < 16; ++j) offsets[j] = std::min(j, count - 1) * elements;
  const __m512i offset = _mm512_load_si512(offsets);
  __m512 amax = _mm512_setzero_ps();
  for (int i = 0; i < elements; ++i) {
    v[i] = _mm512_i32gather_ps(offset, tiles + i, 4);
    amax = _mm512_max_ps(amax, _mm512_abs_ps(v[i]));
  }
  alignas(64) float lane_amax[16], lane_normalize[16];
  _mm512_store_ps(lane_amax, amax);
  for (int j = 0; j < count; ++j) {
    const float a = fp8::max_nan(lane_amax[j], fp8::float_of(0x00800000u));
    scales[j] = lp::e8m0_ceil(a / fp8::max_e4m3);
    lane_normalize[j] = 1.0f / lp::e8m0_value(scales[j]);
  }
  for (int j = count; j < 16; ++j) lane_normalize[j] = lane_normalize[count - 1];
  const __m512 normalize_by = _mm512_load_ps(lane_normalize);
  __mmask16 zero = 0, positive_zero = 0, negative_zero = 0, not_finite = 0;
  for (int i = 0; i < elements; ++i) {
    v[i] = _mm512_mul_ps(v[i], normalize_by);
    const __m512i bits = _mm512_castps_si512(v[i]);
    zero |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_setzero_si512());
    positive_zero |= _mm512_cmpeq_epi32_mask(bits, _mm512_setzero_si512());
    negative_zero |= _mm512_cmpeq_epi32_mask(bits, _mm512_set1_epi32(static_cast<int>(0x80000000u)));
    not_finite |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7F800000)), _mm512_set1_epi32(0x7F800000));
  }
  return {zero, static_cast<__mmask16>(not_finite | (negative_zero & positive_zero))};
}

/// lp::lut_fit lane by lane, up to the best init's centres: the three inits in order, 16 Lloyd
/// iterations each (fewer once they stop moving), the loss of each, the strictly smaller replacing.
QPOLICY_AVX512_F16C centres fit_lanes(const __m512* v, __m512* work, __mmask16 preserve_zero) {
  // The inits' order statistics: the sorted values' ranks 0, 511 and 32, 96, ..., 480.
  std::copy_n(v, elements, work);
  sort_lanes(work);
  __m512 quantile[entries];
  for (int k = 0; k < entries; ++k) quantile[k] = work[(2 * k + 1) * (elements / entries) / 2];
  const __m512 low = work[0], high = work[elements - 1];
  centres best{};
  __m512 best_loss = _mm512_set1_ps(fp8::float_of(0x7F800000u));
  __mmask16 have_best = 0;
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
        s.c[k] = _mm512_add_ps(low, _mm512_mul_ps(_mm512_sub_ps(high, low), _mm512_set1_ps(fraction)));
      }
    }
    normalize(s, preserve_zero);
    // An iteration is a function of the centres alone: once it leaves every lane's centres as they
    // were (bit for bit), the rest would too.
    for (int it = 0; it < lp::lut_iterations; ++it) {
      const centres before = s;
      iterate(v, s, preserve_zero);
      __mmask16 moved = 0;
      for (int k = 0; k < entries; ++k) moved |= _mm512_cmpneq_epi32_mask(_mm512_castps_si512(s.c[k]), _mm512_castps_si512(before.c[k]));
      if (!moved) break;
    }
    const __m512 l = loss(v, s, work);
    // Strictly smaller replaces (ties keep the earlier init); the last init is taken if none was.
    const __mmask16 take = _mm512_cmp_ps_mask(l, best_loss, _CMP_LT_OQ) | (which == 2 ? static_cast<__mmask16>(~have_best) : __mmask16{0});
    best_loss = _mm512_mask_mov_ps(best_loss, take, l);
    for (int k = 0; k < entries; ++k) best.c[k] = _mm512_mask_mov_ps(best.c[k], take, s.c[k]);
    have_best |= take;
  }
  return best;
}

/// Each lane's indices under centres `best` (indices[16 i + j]: element i of lane j).
QPOLICY_AVX512_F16C void lane_indices(const __m512* v, const centres& best, std::uint8_t* indices) {
  __m512 b[entries - 1];
  boundaries(best, b);
  for (int i = 0; i < elements; ++i) {
    __mmask16 in[entries];
    clusters(b, v[i], in);
    __m512i index = _mm512_setzero_si512();
    for (int k = 1; k < entries; ++k) index = _mm512_mask_mov_epi32(index, in[k], _mm512_set1_epi32(k));
    _mm_store_si128(reinterpret_cast<__m128i*>(indices + 16 * i), _mm512_cvtepi32_epi8(index));
  }
}

}  // namespace

QPOLICY_AVX512_F16C void lut_b_tiles16(const float* tiles, int count, float* scratch, lp::lut_scratch& scalar, std::uint8_t* packed,
                                       std::uint8_t* codebooks, std::uint8_t* scales) {
  __m512* v = reinterpret_cast<__m512*>(scratch);
  __m512* work = v + elements;
  std::uint8_t* indices = reinterpret_cast<std::uint8_t*>(work + elements);  // [element][lane]
  const lane_masks masks = normalize_lanes(tiles, count, v, scales);
  const centres best = fit_lanes(v, work, masks.zero);
  lane_indices(v, best, indices);
  alignas(64) float book[entries][16];
  for (int k = 0; k < entries; ++k) _mm512_store_ps(book[k], best.c[k]);
  std::uint8_t tile_indices[elements];
  for (int j = 0; j < count; ++j) {
    std::uint8_t* tile_packed = packed + j * lp::lut_packed_bytes;
    std::uint8_t* tile_book = codebooks + j * entries;
    if (masks.scalar >> j & 1) {
      float tile[elements];
      std::copy_n(tiles + j * elements, elements, tile);
      scales[j] = lp::lut_b_tile(tile, scalar, tile_packed, tile_book);
      continue;
    }
    for (int i = 0; i < elements; ++i) tile_indices[i] = indices[16 * i + j];
    lp::lut_pack(tile_indices, tile_packed);
    for (int k = 0; k < entries; ++k) tile_book[k] = fp8::tcvt(book[k][j]);
  }
}

#pragma GCC diagnostic pop

}  // namespace qpolicy::cpu::rows

#endif
