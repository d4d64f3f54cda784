// The decode-batch GEMM in float32 and the blocked GEMM's panel decode, in portable SIMD (decode_gemm.hpp):
// each weight row decoded a chunk at a time by its code format's vector decoder (decode_rows-inl.h),
// every row of x multiplied with the chunk while it is in L1. Compiled once per target of the platform;
// cpu_target.cpp says which one runs.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/decode_gemm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "decode_rows-inl.h"
#include "lone_row-inl.h"

#include <algorithm>

#include "qpolicy/kernels/cpu/detail/parallel.hpp"

HWY_BEFORE_NAMESPACE();
namespace qpolicy::cpu::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// acc[r * L + j] += the products x[r][t] w[t] of the t = j (mod L) lanes, t < count, for r < rows (the
/// lanes' float32 sums; elements past the last whole vector in lane t - whole). Eight rows of x share
/// each load of w, eight chains of multiply-adds in flight (two multiply-add units of four cycles'
/// latency), then four; a lone row runs four chains along K.
HWY_INLINE void dot_rows(const float* HWY_RESTRICT x, std::int64_t ldx, std::int64_t rows, const float* HWY_RESTRICT w,
                         std::int64_t count, float* HWY_RESTRICT acc) {
  const float_tag d;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t whole = count / L * L;
  std::int64_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    const float* HWY_RESTRICT x0 = x + r * ldx;
    float* HWY_RESTRICT a = acc + r * L;
    auto a0 = hn::LoadU(d, a), a1 = hn::LoadU(d, a + L), a2 = hn::LoadU(d, a + 2 * L), a3 = hn::LoadU(d, a + 3 * L);
    auto a4 = hn::LoadU(d, a + 4 * L), a5 = hn::LoadU(d, a + 5 * L), a6 = hn::LoadU(d, a + 6 * L), a7 = hn::LoadU(d, a + 7 * L);
    for (std::int64_t t = 0; t < whole; t += L) {
      const auto wv = hn::LoadU(d, w + t);
      a0 = hn::MulAdd(hn::LoadU(d, x0 + t), wv, a0);
      a1 = hn::MulAdd(hn::LoadU(d, x0 + ldx + t), wv, a1);
      a2 = hn::MulAdd(hn::LoadU(d, x0 + 2 * ldx + t), wv, a2);
      a3 = hn::MulAdd(hn::LoadU(d, x0 + 3 * ldx + t), wv, a3);
      a4 = hn::MulAdd(hn::LoadU(d, x0 + 4 * ldx + t), wv, a4);
      a5 = hn::MulAdd(hn::LoadU(d, x0 + 5 * ldx + t), wv, a5);
      a6 = hn::MulAdd(hn::LoadU(d, x0 + 6 * ldx + t), wv, a6);
      a7 = hn::MulAdd(hn::LoadU(d, x0 + 7 * ldx + t), wv, a7);
    }
    hn::StoreU(a0, d, a), hn::StoreU(a1, d, a + L), hn::StoreU(a2, d, a + 2 * L), hn::StoreU(a3, d, a + 3 * L);
    hn::StoreU(a4, d, a + 4 * L), hn::StoreU(a5, d, a + 5 * L), hn::StoreU(a6, d, a + 6 * L), hn::StoreU(a7, d, a + 7 * L);
  }
  for (; r + 4 <= rows; r += 4) {
    const float* HWY_RESTRICT x0 = x + r * ldx;
    auto a0 = hn::LoadU(d, acc + r * L), a1 = hn::LoadU(d, acc + (r + 1) * L);
    auto a2 = hn::LoadU(d, acc + (r + 2) * L), a3 = hn::LoadU(d, acc + (r + 3) * L);
    for (std::int64_t t = 0; t < whole; t += L) {
      const auto wv = hn::LoadU(d, w + t);
      a0 = hn::MulAdd(hn::LoadU(d, x0 + t), wv, a0);
      a1 = hn::MulAdd(hn::LoadU(d, x0 + ldx + t), wv, a1);
      a2 = hn::MulAdd(hn::LoadU(d, x0 + 2 * ldx + t), wv, a2);
      a3 = hn::MulAdd(hn::LoadU(d, x0 + 3 * ldx + t), wv, a3);
    }
    hn::StoreU(a0, d, acc + r * L);
    hn::StoreU(a1, d, acc + (r + 1) * L);
    hn::StoreU(a2, d, acc + (r + 2) * L);
    hn::StoreU(a3, d, acc + (r + 3) * L);
  }
  for (; r < rows; ++r) {
    const float* HWY_RESTRICT xr = x + r * ldx;
    auto a0 = hn::LoadU(d, acc + r * L), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
    std::int64_t t = 0;
    for (; t + 4 * L <= whole; t += 4 * L) {
      a0 = hn::MulAdd(hn::LoadU(d, xr + t), hn::LoadU(d, w + t), a0);
      a1 = hn::MulAdd(hn::LoadU(d, xr + t + L), hn::LoadU(d, w + t + L), a1);
      a2 = hn::MulAdd(hn::LoadU(d, xr + t + 2 * L), hn::LoadU(d, w + t + 2 * L), a2);
      a3 = hn::MulAdd(hn::LoadU(d, xr + t + 3 * L), hn::LoadU(d, w + t + 3 * L), a3);
    }
    for (; t < whole; t += L) a0 = hn::MulAdd(hn::LoadU(d, xr + t), hn::LoadU(d, w + t), a0);
    hn::StoreU(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), d, acc + r * L);
  }
  for (r = 0; r < rows; ++r)
    for (std::int64_t t = whole; t < count; ++t) acc[r * L + (t - whole)] += x[r * ldx + t] * w[t];
}

/// Fetches row n's code bytes row_prefetch_bytes past [k0, k0 + count) into the cache (past the row's
/// end: the next rows', which the block reads next or the next block reads first): a block's rows
/// interleave their streams, chunk by chunk, which the hardware prefetcher follows late.
HWY_INLINE void prefetch_ahead(const code_rows& w, std::int64_t n, std::int64_t k0, std::int64_t count) {
  std::int64_t first = 0, bytes = 0;  // from the start of the codes
  const std::int64_t at = n * w.k + k0;
  switch (w.format) {
    case row_format::f32: first = at * 4, bytes = count * 4; break;
    case row_format::e4m3:
    case row_format::e4m3_e8m0:
    case row_format::int8: first = at, bytes = count; break;
    case row_format::e2m1_e8m0:
    case row_format::e2m1_e4m3: first = at / 2, bytes = count / 2; break;
    case row_format::lut3: return;  // tiles of 8 rows: each row's run is 24 bytes of a 192-byte tile, read in order
  }
  const char* ahead = static_cast<const char*>(w.codes) + first + row_prefetch_bytes;
  for (std::int64_t b = 0; b < bytes; b += 64) hwy::Prefetch(ahead + b);
}

/// Weight rows a thread takes together: each chunk of x (16 rows x 128 floats, 8 KiB) is read from L2 once
/// for all of them and stays in L1 while each row's chunk is decoded and multiplied.
inline constexpr std::int64_t row_block = 8;

/// The floats between the ends of consecutive rows of x in the decode-batch GEMM's copy: rows K floats
/// apart (a multiple of 4 KiB for most models' K) fall on the same L1 sets and banks, and a step's eight
/// loads of them collide; 96 bytes apart they do not (8 rows of x, AVX2: the float32 layer 59 -> 84
/// GFLOPS, MXFP4 86 -> 93).
inline constexpr std::int64_t x_row_pad = 24;

/// y[m, n] for weight rows [first, last): decode_gemm_rows' work for one thread.
void decode_gemm_range(const code_rows& w, const batch_activations& x, const group_scales* groups, float* y, std::int64_t first,
                       std::int64_t last) {
  const float_tag d;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t n = w.n, k = w.k, m = x.m;
  alignas(64) float acc[row_block * decode_batch_rows * 16], part[decode_batch_rows * 16], buffer[decode_chunk];
  // A lone activation row (the last row of x when m % 16 == 1) as the weights' fused decode reads it.
  scratch_vector<float> lone_row(reads_prepared_row(w.format) && m % decode_batch_rows == 1 ? static_cast<std::size_t>(k) : 0);
  if (!lone_row.empty() && !prepare_lone_row(w.format, x.values + (m - 1) * k, k, lone_row.data())) lone_row.clear();
  // Two or more rows of x, copied x_row_pad floats apart.
  const std::int64_t ldx = m > 1 ? k + x_row_pad : k;
  scratch_vector<float> padded(m > 1 ? static_cast<std::size_t>(m * ldx) : 0);
  for (std::int64_t r = 0; r < m && m > 1; ++r) std::copy(x.values + r * k, x.values + (r + 1) * k, padded.data() + r * ldx);
  const float* xv = m > 1 ? padded.data() : x.values;
  for (std::int64_t row0 = first; row0 < last; row0 += row_block) {
    const std::int64_t block = std::min(row_block, last - row0);
    for (std::int64_t m0 = 0; m0 < m; m0 += decode_batch_rows) {
      const std::int64_t rows = std::min(decode_batch_rows, m - m0);
      std::fill(acc, acc + block * rows * L, 0.0f);
      for (std::int64_t k0 = 0; k0 < k; k0 += decode_chunk) {
        const std::int64_t count = std::min(decode_chunk, k - k0);
        const float* xs = xv + m0 * ldx + k0;
        for (std::int64_t j = 0; j < block; ++j) {
          const std::int64_t row = row0 + j;
          float* a = acc + j * rows * L;
          prefetch_ahead(w, row, k0, count);
          float* sums = groups ? part : a;  // with group scales, the chunk's sums from zero
          if (groups) std::fill(part, part + rows * L, 0.0f);
          if (rows != 1 || !fused_dot_one(w, row, k0, count, xs, lone_row.empty() ? nullptr : lone_row.data() + k0, sums)) dot_rows(xs, ldx, rows, decode_run(w, row, k0, count, buffer), count, sums);
          if (!groups) continue;
          const float ws = groups->w_scale[(row / 128) * groups->chunks + k0 / decode_chunk];
          for (std::int64_t r = 0; r < rows; ++r) {
            const auto s = hn::Set(d, groups->a_scale[(m0 + r) * groups->chunks + k0 / decode_chunk] * ws);
            hn::StoreU(hn::MulAdd(hn::LoadU(d, part + r * L), s, hn::LoadU(d, a + r * L)), d, a + r * L);
          }
        }
      }
      for (std::int64_t j = 0; j < block; ++j)
        for (std::int64_t r = 0; r < rows; ++r)
          y[(m0 + r) * n + row0 + j] = hn::GetLane(hn::SumOfLanes(d, hn::LoadU(d, acc + (j * rows + r) * L)));
    }
  }
}

/// decode_panel_rows: each of the 32 rows decoded, then written down the panel's columns.
void decode_panel_range(const code_rows& w, std::int64_t n0, std::int64_t k0, std::int64_t depth, float* panel) {
  alignas(64) float buffer[panel_depth];
  for (std::int64_t j = 0; j < panel_cols; ++j) {
    if (n0 + j >= w.n) {
      for (std::int64_t t = 0; t < depth; ++t) panel[t * panel_cols + j] = 0.0f;
      continue;
    }
    const float* values = decode_run(w, n0 + j, k0, depth, buffer);
    for (std::int64_t t = 0; t < depth; ++t) panel[t * panel_cols + j] = values[t];
  }
}

/// R rows of the blocked GEMM's accumulators against one panel (panel_accumulate, decode_gemm.hpp), two
/// vectors of columns at a time: acc[i][j] += a[i][t] * panel[t][j] in t's order, each product rounded,
/// then added; or, with `chunk_scale`, a chunk's sums from zero added as (sum * chunk_scale[i]) * w_scale.
template <int R>
HWY_INLINE void panel_rows(const float* HWY_RESTRICT a, std::int64_t a_stride, const float* HWY_RESTRICT panel, std::int64_t depth,
                           float* HWY_RESTRICT acc, const float* chunk_scale, float w_scale) {
  const float_tag d;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t j0 = 0; j0 < panel_cols; j0 += 2 * L) {
    const auto start = [&](int i, int h) { return chunk_scale ? hn::Zero(d) : hn::LoadU(d, acc + i * panel_cols + j0 + h * L); };
    auto c00 = start(0, 0), c01 = start(0, 1);
    auto c10 = R == 4 ? start(1, 0) : hn::Zero(d), c11 = R == 4 ? start(1, 1) : hn::Zero(d);
    auto c20 = R == 4 ? start(2, 0) : hn::Zero(d), c21 = R == 4 ? start(2, 1) : hn::Zero(d);
    auto c30 = R == 4 ? start(3, 0) : hn::Zero(d), c31 = R == 4 ? start(3, 1) : hn::Zero(d);
    for (std::int64_t t = 0; t < depth; ++t) {
      const auto p0 = hn::LoadU(d, panel + t * panel_cols + j0), p1 = hn::LoadU(d, panel + t * panel_cols + j0 + L);
      const auto x0 = hn::Set(d, a[t]);
      c00 = hn::Add(c00, hn::Mul(x0, p0)), c01 = hn::Add(c01, hn::Mul(x0, p1));
      if constexpr (R == 4) {
        const auto x1 = hn::Set(d, a[a_stride + t]), x2 = hn::Set(d, a[2 * a_stride + t]), x3 = hn::Set(d, a[3 * a_stride + t]);
        c10 = hn::Add(c10, hn::Mul(x1, p0)), c11 = hn::Add(c11, hn::Mul(x1, p1));
        c20 = hn::Add(c20, hn::Mul(x2, p0)), c21 = hn::Add(c21, hn::Mul(x2, p1));
        c30 = hn::Add(c30, hn::Mul(x3, p0)), c31 = hn::Add(c31, hn::Mul(x3, p1));
      }
    }
    const auto finish = [&](const auto& c, int i, int h) {
      float* target = acc + i * panel_cols + j0 + h * L;
      if (chunk_scale) hn::StoreU(hn::Add(hn::LoadU(d, target), hn::Mul(hn::Mul(c, hn::Set(d, chunk_scale[i])), hn::Set(d, w_scale))), d, target);
      else hn::StoreU(c, d, target);
    };
    finish(c00, 0, 0), finish(c01, 0, 1);
    if constexpr (R == 4) finish(c10, 1, 0), finish(c11, 1, 1), finish(c20, 2, 0), finish(c21, 2, 1), finish(c30, 3, 0), finish(c31, 3, 1);
  }
}

void panel_accumulate_range(const float* a, std::int64_t a_stride, std::int64_t rows, const float* panel, std::int64_t depth, float* acc,
                            const float* chunk_scale, float w_scale) {
  std::int64_t r = 0;
  for (; r + 4 <= rows; r += 4)
    panel_rows<4>(a + r * a_stride, a_stride, panel, depth, acc + r * panel_cols, chunk_scale ? chunk_scale + r : nullptr, w_scale);
  for (; r < rows; ++r)
    panel_rows<1>(a + r * a_stride, a_stride, panel, depth, acc + r * panel_cols, chunk_scale ? chunk_scale + r : nullptr, w_scale);
}

}  // namespace HWY_NAMESPACE
}  // namespace qpolicy::cpu::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_dispatch.hpp"
#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::cpu::detail {

HWY_EXPORT(decode_gemm_range);
HWY_EXPORT(decode_panel_range);
HWY_EXPORT(panel_accumulate_range);

void decode_gemm_rows(const code_rows& w, const batch_activations& x, const group_scales* groups, float* y, unsigned threads) {
  const auto kernel = QPOLICY_DISPATCH(decode_gemm_range);
  parallel_ranges(w.n, threads, [&](std::int64_t first, std::int64_t last) { kernel(w, x, groups, y, first, last); });
}

void decode_panel_rows(const code_rows& w, std::int64_t n0, std::int64_t k0, std::int64_t depth, float* panel) {
  QPOLICY_DISPATCH(decode_panel_range)(w, n0, k0, depth, panel);
}

void panel_accumulate(const float* a, std::int64_t a_stride, std::int64_t rows, const float* panel, std::int64_t depth, float* acc,
                      const float* chunk_scale, float w_scale) {
  QPOLICY_DISPATCH(panel_accumulate_range)(a, a_stride, rows, panel, depth, acc, chunk_scale, w_scale);
}

const std::array<float, 256>& e4m3_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[static_cast<std::size_t>(c)] = fp8::decode(static_cast<std::uint8_t>(c));
    return t;
  }();
  return table;
}

bool exact_bf16(const float* x, std::int64_t count, std::uint16_t* bf16) {
  if constexpr (QPOLICY_X86_KERNELS)
    if (has_bf16_dot_kernels()) return exact_bf16_avx512(x, count, bf16);
  return exact_bf16_scalar(x, count, bf16);
}

bool exact_bf16_scalar(const float* x, std::int64_t count, std::uint16_t* bf16) {
  bool exact = true;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint16_t b = fp8::to_bf16(x[i]);
    bf16[i] = b;
    const float back = fp8::from_bf16(b);
    // At least 2^-60: products with weights of at least 2^-60 are normal floats, which vdpbf16ps does
    // not flush to zero. A NaN compares unequal but stays NaN.
    exact &= (back == x[i] && (back == 0.0f || std::abs(back) >= 0x1p-60f)) || x[i] != x[i];
  }
  return exact;
}

}  // namespace qpolicy::cpu::detail
#endif  // HWY_ONCE
