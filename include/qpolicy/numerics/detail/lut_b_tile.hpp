#pragma once
// LUT-B, one 8x64 tile at a time (new-schemes-numerics.md §B.2-B.4): the tile's E8M0 scale, the Lloyd fit
// of its eight-entry e4m3 codebook (three initializations, 16 iterations each), the packing of its 512
// 3-bit indices, and the decode of one element. __host__ __device__: the CPU paths and the CUDA kernel
// run the same arithmetic, in vLLM's CPU order (the vectors' reference; GPU atomics in vLLM itself make
// its CUDA results order-dependent, §B.3). The CPU's fast path runs the same operations on sixteen
// tiles at once, a tile per register lane (kernels/cpu/lut_b_lanes_avx512.cpp).
//
// torch reductions are reproduced where their order can reach the result: the tile mean that seeds the
// farthest-point init and the loss that picks the best init are torch-CPU's cascade sum over 8-lane
// vectors (4 accumulators of 16 vectors, lanes added last); the centroid sums are scatter_add's element
// order. The codebook snaps every centre to e4m3, so only a sum within an ulp of a snapping midpoint, or
// two inits within an ulp of the same loss, could notice another order.
#include <cstdint>

#include "qpolicy/numerics/block_formats.hpp"
#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::lp {

inline constexpr int lut_rows = 8;                        // output channels per tile
inline constexpr int lut_cols = 64;                       // K per tile
inline constexpr int lut_elements = lut_rows * lut_cols;  // 512
inline constexpr int lut_entries = 8;                     // codebook entries
inline constexpr int lut_packed_bytes = lut_elements * 3 / 8;  // 192
inline constexpr int lut_iterations = 16;

/// The 3-bit index of element i (row-major in the tile) of a packed tile: 8 indices to 3 bytes, little
/// endian, index i at bits 3i..3i+2 of its group's 24-bit word.
QPOLICY_HD std::uint8_t lut_index(const std::uint8_t* packed, int i) {
  const std::uint8_t* g = packed + (i / 8) * 3;
  const std::uint32_t word = g[0] | (static_cast<std::uint32_t>(g[1]) << 8) | (static_cast<std::uint32_t>(g[2]) << 16);
  return static_cast<std::uint8_t>((word >> (3 * (i % 8))) & 7u);
}

/// Packs a tile's 512 indices into 192 bytes.
QPOLICY_HD void lut_pack(const std::uint8_t* indices, std::uint8_t* packed) {
  for (int g = 0; g < lut_elements / 8; ++g) {
    std::uint32_t word = 0;
    for (int i = 0; i < 8; ++i) word |= static_cast<std::uint32_t>(indices[g * 8 + i] & 7u) << (3 * i);
    packed[g * 3] = static_cast<std::uint8_t>(word & 0xFFu);
    packed[g * 3 + 1] = static_cast<std::uint8_t>((word >> 8) & 0xFFu);
    packed[g * 3 + 2] = static_cast<std::uint8_t>((word >> 16) & 0xFFu);
  }
}

/// Element (r, k) of a tile decoded (§B.4): F8(codebook[index]) * 2^(scale - 127), exact in float32.
QPOLICY_HD float lut_value(const std::uint8_t* packed, const std::uint8_t* codebook, std::uint8_t scale, int r, int k) {
  return fp8::decode(codebook[lut_index(packed, r * lut_cols + k)]) * e8m0_value(scale);
}

/// Decodes a whole tile: its eight values once (F8(codebook) * E8(scale), exact in float32), then
/// store(r, k, value) for each element, a group of 8 indices from its 3 bytes at a time.
template <class Store>
QPOLICY_HD void lut_decode_tile(const std::uint8_t* packed, const std::uint8_t* codebook, std::uint8_t scale, Store store) {
  float book[lut_entries];
  for (int e = 0; e < lut_entries; ++e) book[e] = fp8::decode(codebook[e]) * e8m0_value(scale);
  for (int g = 0; g < lut_elements / 8; ++g) {
    const std::uint32_t word = packed[g * 3] | (static_cast<std::uint32_t>(packed[g * 3 + 1]) << 8) |
                               (static_cast<std::uint32_t>(packed[g * 3 + 2]) << 16);
    for (int i = 0; i < 8; ++i) store(g / 8, (g % 8) * 8 + i, book[(word >> (3 * i)) & 7u]);
  }
}

/// torch-CPU's sum of 512 contiguous float32 values (the cascade over 8-lane vectors, see above).
QPOLICY_HD float torch_sum_512(const float* x) {
  float partial[8];
  for (int l = 0; l < 8; ++l) {
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = 0; i < 16; ++i)
      for (int k = 0; k < 4; ++k) acc[k] += x[(4 * i + k) * 8 + l];
    partial[l] = ((acc[0] + acc[1]) + acc[2]) + acc[3];
  }
  float sum = 0.0f;
  for (int l = 0; l < 8; ++l) sum += partial[l];
  return sum;
}

/// A centre clamped to ±448 and rounded to e4m3 (RNE), as float32.
QPOLICY_HD float lut_snap(float c) {
  const float m = fp8::max_e4m3;
  return fp8::decode(fp8::tcvt(c > m ? m : c < -m ? -m : c));
}

/// Snaps the centres, sets the first one of smallest magnitude to +0 when the tile holds an exact 0,
/// and sorts them ascending (stably: equal values keep their order, -0 before +0 only as they came).
QPOLICY_HD void lut_normalize(float* c, bool preserve_zero) {
  int zero = 0;
  for (int k = 0; k < lut_entries; ++k) {
    c[k] = lut_snap(c[k]);
    if (fp8::abs_f32(c[k]) < fp8::abs_f32(c[zero])) zero = k;
  }
  if (preserve_zero) c[zero] = 0.0f;
  for (int k = 1; k < lut_entries; ++k)  // insertion sort: stable, eight entries
    for (int j = k; j > 0 && c[j] < c[j - 1]; --j) {
      const float t = c[j];
      c[j] = c[j - 1];
      c[j - 1] = t;
    }
}

/// The boundaries between neighbouring centres, (c[k] + c[k+1]) * 0.5, exact in float32.
QPOLICY_HD void lut_boundaries(const float* c, float* b) {
  for (int k = 0; k + 1 < lut_entries; ++k) b[k] = (c[k] + c[k + 1]) * 0.5f;
}

/// The index of v's centre: the boundaries below v (a value on a boundary goes to the lower centre,
/// searchsorted's left side).
QPOLICY_HD std::uint8_t lut_assign(const float* b, float v) {
  int idx = 0;
  for (int k = 0; k + 1 < lut_entries; ++k) idx += b[k] < v;
  return static_cast<std::uint8_t>(idx);
}

/// Every value's index under centres c.
QPOLICY_HD void lut_assign_all(const float* c, const float* v, std::uint8_t* indices) {
  float b[lut_entries - 1];
  lut_boundaries(c, b);
  for (int i = 0; i < lut_elements; ++i) indices[i] = lut_assign(b, v[i]);
}

/// Scratch of one tile fit (kept by the caller: 4.6 KB).
struct lut_scratch {
  float sorted[lut_elements], work[lut_elements];
  std::uint8_t indices[lut_elements];
};

/// The three initializations of §B.3 step 4, in order: farthest point, quantiles, uniform.
QPOLICY_HD void lut_init(int which, const float* v, lut_scratch& s, float* c) {
  if (which == 0) {
    c[0] = torch_sum_512(v) / static_cast<float>(lut_elements);  // the mean, seeding the distances unsnapped
    float* distance = s.work;
    for (int i = 0; i < lut_elements; ++i) {
      const float d = v[i] - c[0];
      distance[i] = d * d;
    }
    for (int k = 1; k < lut_entries; ++k) {
      int far = 0;
      for (int i = 1; i < lut_elements; ++i)
        if (distance[i] > distance[far]) far = i;  // argmax: the first index of the maximum
      c[k] = v[far];
      for (int i = 0; i < lut_elements; ++i) {
        const float d = v[i] - c[k];
        distance[i] = d * d < distance[i] ? d * d : distance[i];
      }
    }
  } else if (which == 1) {
    for (int k = 0; k < lut_entries; ++k) c[k] = s.sorted[(2 * k + 1) * (lut_elements / lut_entries) / 2];  // ranks 32, 96, ..., 480
  } else {
    // torch.linspace(0, 1, 8) in float32: step * i below the halfway point, 1 - step * (7 - i) above it.
    const float step = 1.0f / 7.0f, low = s.sorted[0], high = s.sorted[lut_elements - 1];
    for (int k = 0; k < lut_entries; ++k) {
      const float fraction = k < lut_entries / 2 ? step * static_cast<float>(k) : 1.0f - step * static_cast<float>(lut_entries - 1 - k);
      c[k] = low + (high - low) * fraction;
    }
  }
}

/// Sorts the tile's values ascending into s.sorted (a stable bottom-up merge sort, usable on the GPU).
QPOLICY_HD void lut_sort(const float* v, lut_scratch& s) {
  float* a = s.sorted;
  float* b = s.work;
  for (int i = 0; i < lut_elements; ++i) a[i] = v[i];
  for (int width = 1; width < lut_elements; width *= 2) {
    for (int lo = 0; lo < lut_elements; lo += 2 * width) {
      const int mid = lo + width, hi = lo + 2 * width;
      int i = lo, j = mid, o = lo;
      while (i < mid && j < hi) b[o++] = a[j] < a[i] ? a[j++] : a[i++];
      while (i < mid) b[o++] = a[i++];
      while (j < hi) b[o++] = a[j++];
    }
    float* t = a;
    a = b;
    b = t;
  }
  // 512 = 2^9 passes leave the result in work; copy it home.
  if (a != s.sorted)
    for (int i = 0; i < lut_elements; ++i) s.sorted[i] = a[i];
}

/// Fits a tile's codebook to its normalized values v' (§B.3 step 4): writes the best init's indices and
/// its ascending e4m3 centres (as bytes).
QPOLICY_HD void lut_fit(const float* v, lut_scratch& s, std::uint8_t* best_indices, std::uint8_t* codebook) {
  bool preserve_zero = false;
  for (int i = 0; i < lut_elements; ++i) preserve_zero = preserve_zero || v[i] == 0.0f;
  lut_sort(v, s);
  float best_loss = fp8::float_of(0x7F800000u);
  bool have_best = false;
  for (int which = 0; which < 3; ++which) {
    float c[lut_entries];
    lut_init(which, v, s, c);
    lut_normalize(c, preserve_zero);
    for (int it = 0; it < lut_iterations; ++it) {
      float sums[lut_entries] = {}, counts[lut_entries] = {};
      lut_assign_all(c, v, s.indices);
      for (int i = 0; i < lut_elements; ++i) {  // scatter_add_, element order
        sums[s.indices[i]] += v[i];
        counts[s.indices[i]] += 1.0f;
      }
      for (int k = 0; k < lut_entries; ++k)
        if (counts[k] > 0.0f) c[k] = sums[k] / counts[k];
      lut_normalize(c, preserve_zero);
    }
    float* squares = s.work;
    lut_assign_all(c, v, s.indices);
    for (int i = 0; i < lut_elements; ++i) {
      const float d = c[s.indices[i]] - v[i];
      squares[i] = d * d;
    }
    const float loss = torch_sum_512(squares);
    if (loss < best_loss || (!have_best && which == 2)) {  // strictly smaller: ties keep the earlier init
      best_loss = loss;
      have_best = true;
      for (int i = 0; i < lut_elements; ++i) best_indices[i] = s.indices[i];
      for (int k = 0; k < lut_entries; ++k) codebook[k] = fp8::tcvt(c[k]);
    }
  }
}

/// One tile (§B.3): `tile` holds its 512 values widened from D, row-major (8 x 64). Writes the packed
/// indices and the codebook; returns the E8M0 scale byte (CEIL of amax / 448, as MXFP8's torch path).
QPOLICY_HD std::uint8_t lut_b_tile(float* tile, lut_scratch& s, std::uint8_t* packed, std::uint8_t* codebook) {
  float a = 0.0f;
  for (int i = 0; i < lut_elements; ++i) a = fp8::max_nan(a, fp8::abs_f32(tile[i]));
  a = fp8::max_nan(a, fp8::float_of(0x00800000u));
  const std::uint8_t b = e8m0_ceil(a / fp8::max_e4m3);
  // v' = v * 2^-e, e = b - 127: exact; 2^127 for b = 0.
  const float normalize = 1.0f / e8m0_value(b);
  for (int i = 0; i < lut_elements; ++i) tile[i] *= normalize;
  std::uint8_t indices[lut_elements];
  lut_fit(tile, s, indices, codebook);
  lut_pack(indices, packed);
  return b;
}

}  // namespace qpolicy::lp
