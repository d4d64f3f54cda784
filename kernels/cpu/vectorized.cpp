#include "vectorized.hpp"

#include "parallel.hpp"
#include "row_ops.hpp"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace qpolicy::cpu {

using namespace fp8;

namespace {

/// Runs fn(first, last) over [0, items) split into one contiguous range per thread.
template <class Fn>
void parallel_ranges(std::int64_t items, const cpu_options& o, Fn&& fn) {
  detail::parallel_ranges(items, o.threads, std::forward<Fn>(fn));
}

}  // namespace

namespace detail {

QP_CLONES void widen_bf16(const std::uint16_t* __restrict in, std::int64_t n, float* __restrict out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = from_bf16(in[i]);
}
QP_CLONES void widen_f16(const std::uint16_t* __restrict in, std::int64_t n, float* __restrict out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = from_fp16(in[i]);
}

void widen(const input_view& x, std::int64_t first, std::int64_t count, float* out) {
  const char* bytes = static_cast<const char*>(x.data);
  if (x.type == element::f32) {
    std::memcpy(out, bytes + first * 4, static_cast<std::size_t>(count) * 4);
    return;
  }
  const auto run = x.type == element::bf16 ? widen_bf16 : widen_f16;
  const char* p = bytes + first * 2;
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(std::uint16_t) == 0) {
    run(reinterpret_cast<const std::uint16_t*>(p), count, out);
    return;
  }
  std::uint16_t staged[512];
  for (std::int64_t i = 0; i < count; i += 512) {
    const std::int64_t n = std::min<std::int64_t>(512, count - i);
    std::memcpy(staged, p + i * 2, static_cast<std::size_t>(n) * 2);
    run(staged, n, out + i);
  }
}

// On the bits: a magnitude's bits order like its value, and NaN bits exceed infinity's, so the max is
// an unsigned integer max over sixteen independent lanes (max is exact and order-free, so lanes change
// no result) with NaNs counted on the side: the loop vectorizes. When NaNs propagate, the rare NaN case
// rescans for the first one, which is what the scalar fold returns.
QP_CLONES float amax_range(const float* __restrict v, std::int64_t n, bool propagate_nan) {
  constexpr int lanes = 16;
  std::uint32_t acc[lanes] = {}, nans[lanes] = {};
  std::uint32_t bits[lanes];
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    std::memcpy(bits, v + i, sizeof bits);
    for (int j = 0; j < lanes; ++j) {
      const std::uint32_t u = bits[j] & 0x7FFFFFFFu;
      const std::uint32_t nan = u > 0x7F800000u;
      acc[j] = (!nan && u > acc[j]) ? u : acc[j];
      nans[j] |= nan;
    }
  }
  std::uint32_t a = 0, any_nan = 0;
  for (int j = 0; j < lanes; ++j) {
    a = acc[j] > a ? acc[j] : a;
    any_nan |= nans[j];
  }
  for (; i < n; ++i) {
    const std::uint32_t u = bits_of(v[i]) & 0x7FFFFFFFu;
    const bool nan = u > 0x7F800000u;
    a = (!nan && u > a) ? u : a;
    any_nan |= nan;
  }
  if (propagate_nan && any_nan)
    for (std::int64_t k = 0; k < n; ++k)
      if (v[k] != v[k]) return abs_f32(v[k]);
  return float_of(a);
}

}  // namespace detail

namespace {

using detail::amax_range;
using detail::widen;

// The element loops, on restrict pointers with a local count so that GCC vectorizes them (the file is
// built with -fno-trapping-math, which lets it if-convert the selects; rounding is untouched). Each
// is cloned for AVX2 and AVX-512 with the baseline kept, and the loader picks one per machine
// (GCC target_clones, an ifunc): wider vectors, the same IEEE operations, the same bits.
QP_CLONES void codes_times(const float* __restrict in, std::int64_t n, float inv, std::uint8_t* __restrict out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = sat(clamp_s(in[i] * inv));
}
QP_CLONES void codes_over_sat(const float* __restrict in, std::int64_t n, float s, std::uint8_t* __restrict out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = sat(clamp_s(in[i] / s));
}
QP_CLONES void codes_over_torch(const float* __restrict in, std::int64_t n, float s, std::uint8_t* __restrict out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = tcvt(clamp_t(in[i] / s));
}
QP_CLONES void codes_over_group(const float* __restrict in, std::int64_t n, float y, std::uint8_t* __restrict out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = tcvt(clamp_g(in[i] / y));
}
QP_CLONES void codes_times_unclamped(const float* __restrict in, std::int64_t n, float inv, std::uint8_t* __restrict out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = tcvt(in[i] * inv);
}

/// Codes of x * inv under clampS and sat (per-tensor weights and dynamic per-tensor activations).
void scale_rows_reciprocal(const input_view& x, float inv, std::uint8_t* q, const cpu_options& o) {
  parallel_ranges(x.rows, o, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> row(static_cast<std::size_t>(x.cols));
    for (std::int64_t r = first; r < last; ++r) {
      widen(x, r * x.cols, x.cols, row.data());
      codes_times(row.data(), x.cols, inv, q + r * x.cols);
    }
  });
}

}  // namespace

namespace {

// The amax of bf16 values on their bits, without widening: a magnitude's 15 bits order like its
// value, so the widest is the largest, and widening it afterwards is exact. NaN bits (above
// infinity's 0x7F80) are reported, for the caller to take the float path that picks the NaN.
QP_CLONES std::uint16_t amax_bits_bf16(const std::uint16_t* __restrict v, std::int64_t n, bool* nan) {
  constexpr int lanes = 32;
  std::uint16_t acc[lanes] = {}, nans[lanes] = {};
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (int j = 0; j < lanes; ++j) {
      const std::uint16_t u = v[i + j] & 0x7FFF;
      nans[j] |= u > 0x7F80;
      acc[j] = u > acc[j] ? u : acc[j];
    }
  std::uint16_t a = 0, any = 0;
  for (int j = 0; j < lanes; ++j) {
    a = acc[j] > a ? acc[j] : a;
    any |= nans[j];
  }
  for (; i < n; ++i) {
    const std::uint16_t u = v[i] & 0x7FFF;
    any |= u > 0x7F80;
    a = u > a ? u : a;
  }
  *nan = any != 0;
  return a;
}

}  // namespace

namespace detail {
float tensor_amax(const input_view& x, bool propagate_nan, const cpu_options& o) {
  const unsigned n = detail::thread_count(o.threads, x.rows);
  std::vector<float> partial(n, 0.0f);
  const std::int64_t chunk = (x.rows + n - 1) / n;
  const bool bits = x.type == element::bf16 && reinterpret_cast<std::uintptr_t>(x.data) % 2 == 0;
  detail::parallel_ranges(x.rows, o.threads, [&](std::int64_t first, std::int64_t last) {
    if (bits) {  // NaN-free bf16 (almost every weight): one pass over the bits of the whole range
      bool nan = false;
      const auto* v = static_cast<const std::uint16_t*>(x.data) + first * x.cols;
      const std::uint16_t a = amax_bits_bf16(v, (last - first) * x.cols, &nan);
      if (!nan) {
        partial[static_cast<std::size_t>(chunk ? first / chunk : 0)] = from_bf16(a);
        return;
      }
    }
    std::vector<float> row(static_cast<std::size_t>(x.cols));
    float a = 0.0f;
    for (std::int64_t r = first; r < last; ++r) {
      widen(x, r * x.cols, x.cols, row.data());
      const float ra = amax_range(row.data(), x.cols, propagate_nan);
      a = propagate_nan ? max_nan(a, ra) : max_num(a, ra);
    }
    partial[static_cast<std::size_t>(chunk ? first / chunk : 0)] = a;
  });
  float a = 0.0f;
  for (float p : partial) a = propagate_nan ? max_nan(a, p) : max_num(a, p);
  return a;
}

}  // namespace detail

using detail::tensor_amax;

float weight_kernel<fp8_per_tensor>::amax(const input_view& w, const cpu_options& o) { return tensor_amax(w, true, o); }

void weight_kernel<fp8_per_tensor>::run_with_amax(const input_view& w, float amax, std::uint8_t* q, float* scale,
                                                  const cpu_options& o) {
  const float s = amax / max_e4m3;
  scale_rows_reciprocal(w, 1.0f / s, q, o);
  scale[0] = s;
}

void weight_kernel<fp8_per_tensor>::run(const input_view& w, std::uint8_t* q, float* scale, const cpu_options& o) {
  run_with_amax(w, amax(w, o), q, scale, o);
}

void weight_kernel<fp8_per_channel>::run(const input_view& w, std::uint8_t* q, float* scales, const cpu_options& o) {
  parallel_ranges(w.rows, o, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> row(static_cast<std::size_t>(w.cols));
    for (std::int64_t r = first; r < last; ++r) {
      widen(w, r * w.cols, w.cols, row.data());
      const float s = max_nan(amax_range(row.data(), w.cols, true) / max_e4m3, min_scale_factor());
      codes_over_torch(row.data(), w.cols, s, q + r * w.cols);
      scales[r] = s;
    }
  });
}

void weight_kernel<fp8_per_block>::run(const input_view& w, const reference::block_options& opt, std::uint8_t* q,
                                       float* scales, const cpu_options& o) {
  // Block by block (threads split the blocks, not the 128-row slabs, so one slab of a wide matrix
  // still uses every thread), each widened into a 128x128 buffer: the working set is 64 KiB a thread
  // whatever the matrix's width.
  const std::int64_t row_blocks = (w.rows + 127) / 128, col_blocks = (w.cols + 127) / 128;
  parallel_ranges(row_blocks * col_blocks, o, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> block(static_cast<std::size_t>(128 * 128));
    for (std::int64_t b = first; b < last; ++b) {
      const std::int64_t bi = b / col_blocks, bj = b % col_blocks;
      const std::int64_t r0 = bi * 128, nr = std::min<std::int64_t>(128, w.rows - r0);
      const std::int64_t c0 = bj * 128, nc = std::min<std::int64_t>(128, w.cols - c0);
      float a = 0.0f;
      for (std::int64_t r = 0; r < nr; ++r) {
        widen(w, (r0 + r) * w.cols + c0, nc, block.data() + r * 128);
        a = max_nan(a, amax_range(block.data() + r * 128, nc, true));
      }
      a = max_nan(a, block_floor());
      float sf = opt.compiled_variant ? a * float_of(inv_448_bits) : a / max_e4m3;
      if (opt.ue8m0) sf = ue8m0(sf);
      const float inv = 1.0f / sf;
      for (std::int64_t r = 0; r < nr; ++r) codes_times_unclamped(block.data() + r * 128, nc, inv, q + (r0 + r) * w.cols + c0);
      scales[b] = sf;
    }
  });
}

namespace {

QP_CLONES std::int64_t non_finite_16(const std::uint16_t* __restrict v, std::int64_t n, std::uint16_t exponent) {
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) bad += (v[i] & exponent) == exponent;
  return bad;
}
QP_CLONES std::int64_t non_finite_32(const std::uint32_t* __restrict v, std::int64_t n) {
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) bad += (v[i] & 0x7F800000u) == 0x7F800000u;
  return bad;
}

}  // namespace

std::int64_t count_non_finite(const input_view& x) {
  const std::int64_t n = x.rows * x.cols;
  const char* p = static_cast<const char*>(x.data);
  const std::size_t width = x.type == element::f32 ? 4 : 2;
  std::int64_t bad = 0;
  // Aligned views go straight through; an unaligned one is staged a block at a time.
  alignas(64) std::uint32_t staged[1024];
  for (std::int64_t i = 0; i < n;) {
    const bool aligned = reinterpret_cast<std::uintptr_t>(p + i * width) % width == 0;
    const std::int64_t count = aligned ? n - i : std::min<std::int64_t>(n - i, 4096 / static_cast<std::int64_t>(width));
    const void* at = p + i * width;
    if (!aligned) at = std::memcpy(staged, at, static_cast<std::size_t>(count) * width);
    if (x.type == element::f32) bad += non_finite_32(static_cast<const std::uint32_t*>(at), count);
    else bad += non_finite_16(static_cast<const std::uint16_t*>(at), count, x.type == element::bf16 ? 0x7F80 : 0x7C00);
    i += count;
  }
  return bad;
}

void activation_kernel<fp8_per_token>::run(const input_view& x, std::uint8_t* q, float* scales, const cpu_options& o) {
  parallel_ranges(x.rows, o, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> row(static_cast<std::size_t>(x.cols));
    for (std::int64_t r = first; r < last; ++r) {
      widen(x, r * x.cols, x.cols, row.data());
      const float s = max_num(amax_range(row.data(), x.cols, false) / max_e4m3, min_scale_factor());
      codes_over_sat(row.data(), x.cols, s, q + r * x.cols);
      scales[r] = s;
    }
  });
}

void activation_kernel<fp8_per_tensor_dynamic>::run(const input_view& x, std::uint8_t* q, float* scale,
                                                    const cpu_options& o) {
  const float s = tensor_amax(x, false, o) / max_e4m3;
  scale_rows_reciprocal(x, 1.0f / s, q, o);
  scale[0] = s;
}

void activation_kernel<fp8_per_block_dynamic>::run(const input_view& x, const reference::group_options& opt,
                                                   std::uint8_t* q, float* scales, const cpu_options& o) {
  const std::int64_t groups = x.cols / opt.group_size;
  if (opt.layout == scale_layout::column_major_tma)
    std::fill_n(scales, scale_storage(opt.layout, x.rows, groups), 0.0f);
  parallel_ranges(x.rows, o, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> row(static_cast<std::size_t>(x.cols));
    for (std::int64_t m = first; m < last; ++m) {
      widen(x, m * x.cols, x.cols, row.data());
      for (std::int64_t g = 0; g < groups; ++g) {
        const float* in = row.data() + g * opt.group_size;
        const float a = max_num(group_eps(), amax_range(in, opt.group_size, false));
        float y = a / max_e4m3;
        if (opt.ue8m0) y = ue8m0(max_num(abs_f32(y), group_eps()));
        codes_over_group(in, opt.group_size, y, q + m * x.cols + g * opt.group_size);
        scales[scale_offset(opt.layout, x.rows, groups, m, g)] = y;
      }
    }
  });
}

}  // namespace qpolicy::cpu
