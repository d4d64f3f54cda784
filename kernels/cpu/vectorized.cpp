#include "qpolicy/kernels/cpu/vectorized.hpp"

#include "qpolicy/kernels/cpu/detail/e4m3_encoder.hpp"
#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/kernels/cpu/detail/row_ops.hpp"
#include "quantize_rows.hpp"

#include <algorithm>
#include <cstring>
#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>
#endif
#include <thread>
#include <type_traits>
#include <vector>

namespace qpolicy::cpu {

using namespace fp8;
using detail::e4m3_formula;
using detail::e4m3_rule;
using detail::rule_code;
using detail::visit_formula;
using detail::encode_e4m3_bf16;
using detail::encode_e4m3_f32;

namespace {

/// Runs fn(first, last) over [0, items) split into one contiguous range per thread.
template <class Fn>
void parallel_ranges(std::int64_t items, const cpu_options& o, Fn&& fn) {
  detail::parallel_ranges(items, o.threads, std::forward<Fn>(fn));
}

}  // namespace

namespace detail {

void widen(const input_view& x, std::int64_t first, std::int64_t count, float* out) {
  const char* bytes = static_cast<const char*>(x.data);
  if (x.type == element::f32) {
    std::memcpy(out, bytes + first * 4, static_cast<std::size_t>(count) * 4);
    return;
  }
  const auto run = x.type == element::bf16 ? widen_bf16_words : widen_f16_words;
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

}  // namespace detail


namespace {

using detail::amax_bf16;
using detail::amax_range;
using detail::segment_amax_bits;
using detail::widen;

// The formulas of the FP8 keys' code loops (numerics.hpp's names).
constexpr e4m3_formula times_sat{e4m3_rule::clamp_s_sat, true};        // per-tensor: x * (1/s), clampS, sat
constexpr e4m3_formula over_sat{e4m3_rule::clamp_s_sat, false};        // per-token: x / s, clampS, sat
constexpr e4m3_formula over_torch{e4m3_rule::clamp_t_tcvt, false};     // per-channel: x / s, clampT, tcvt
constexpr e4m3_formula over_group{e4m3_rule::clamp_g_sat, false};      // 1xG groups: x / y, clampG (no NaN left)
constexpr e4m3_formula times_unclamped{e4m3_rule::tcvt, true};         // 128x128 blocks: x * (1/s), tcvt

/// The codes of n floats or bf16 words in segments of `width`, segment j with scale s[j], under f.
/// `next`: the run the caller reads next, fetched meanwhile.
template <class T>
void codes(const T* in, std::int64_t n, std::int64_t width, const float* s, e4m3_formula f, std::uint8_t* out,
           const void* next = nullptr) {
  if constexpr (std::is_same_v<T, float>) encode_e4m3_f32(in, n, width, s, f, out, next);
  else encode_e4m3_bf16(in, n, width, s, f, out, next);
}

/// One run with one scale.
template <class T>
void codes(const T* in, std::int64_t n, float s, e4m3_formula f, std::uint8_t* out, const void* next = nullptr) {
  codes(in, n, n, &s, f, out, next);
}

/// x's elements as bf16 words when it is bf16 and aligned for them, else nullptr (the float path).
const std::uint16_t* bf16_words(const input_view& x) {
  return x.type == element::bf16 && reinterpret_cast<std::uintptr_t>(x.data) % 2 == 0 ? static_cast<const std::uint16_t*>(x.data)
                                                                                      : nullptr;
}

/// Codes of x * inv under clampS and sat (per-tensor weights and dynamic per-tensor activations).
void scale_rows_reciprocal(const input_view& x, float inv, std::uint8_t* q, const cpu_options& o) {
  const std::uint16_t* words = bf16_words(x);
  parallel_ranges(x.rows, o, [&](std::int64_t first, std::int64_t last) {
    if (words) {
      // The amax pass has just read this range (the same split) front to back, so its tail is still
      // in the cache: the codes go back to front in blocks, each fetching the block before it.
      constexpr std::int64_t block = 1 << 15;  // elements: 64 KiB of bf16
      const std::int64_t begin = first * x.cols;
      for (std::int64_t end = last * x.cols; end > begin; end -= block) {
        const std::int64_t start = std::max(begin, end - block);
        codes(words + start, end - start, inv, times_sat, q + start, start > begin ? words + std::max(begin, start - block) : nullptr);
      }
      return;
    }
    std::vector<float> row(static_cast<std::size_t>(x.cols));
    for (std::int64_t r = first; r < last; ++r) {
      widen(x, r * x.cols, x.cols, row.data());
      codes(row.data(), x.cols, inv, times_sat, q + r * x.cols);
    }
  });
}
}  // namespace


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

namespace {

/// Rows each with its own scale max(amax / 448, MIN_SF): per-channel weights (the amax propagates NaN,
/// max_nan, clampT and tcvt: spec §6) and per-token activations (NaN ignored, max_num, clampS and
/// sat). bf16 rows without NaN take the bits path; the others the float row buffer.
template <bool Weight>
void row_scaled(const input_view& x, std::uint8_t* q, float* scales, const cpu_options& o) {
  const std::uint16_t* words = bf16_words(x);
  const auto scale_of = [](float a) { return Weight ? max_nan(a / max_e4m3, min_scale_factor()) : max_num(a / max_e4m3, min_scale_factor()); };
  parallel_ranges(x.rows, o, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> row(static_cast<std::size_t>(x.cols));
    for (std::int64_t r = first; r < last; ++r) {
      std::uint8_t* out = q + r * x.cols;
      float a = 0.0f;
      if (words && amax_bf16(words + r * x.cols, x.cols, &a)) {
        scales[r] = scale_of(a);
        // The next row's amax pass then reads from the cache what this pass fetched meanwhile.
        const std::uint16_t* next = r + 1 < last ? words + (r + 1) * x.cols : nullptr;
        codes(words + r * x.cols, x.cols, scales[r], Weight ? over_torch : over_sat, out, next);
        continue;
      }
      widen(x, r * x.cols, x.cols, row.data());
      scales[r] = scale_of(amax_range(row.data(), x.cols, Weight));
      codes(row.data(), x.cols, scales[r], Weight ? over_torch : over_sat, out);
    }
  });
}

}  // namespace

void weight_kernel<fp8_per_channel>::run(const input_view& w, std::uint8_t* q, float* scales, const cpu_options& o) {
  row_scaled<true>(w, q, scales, o);
}

namespace {

/// One 128x128 block on the float path (any element type, NaN picked as the reference picks it).
void block_by_floats(const input_view& w, const fp8::block_options& opt, std::int64_t bi, std::int64_t bj, float* buffer,
                     std::uint8_t* q, float* scales, std::int64_t col_blocks) {
  const std::int64_t r0 = bi * 128, nr = std::min<std::int64_t>(128, w.rows - r0);
  const std::int64_t c0 = bj * 128, nc = std::min<std::int64_t>(128, w.cols - c0);
  float a = 0.0f;
  for (std::int64_t r = 0; r < nr; ++r) {
    widen(w, (r0 + r) * w.cols + c0, nc, buffer + r * 128);
    a = max_nan(a, amax_range(buffer + r * 128, nc, true));
  }
  a = max_nan(a, block_floor());
  float sf = opt.compiled_variant ? a * float_of(inv_448_bits) : a / max_e4m3;
  if (opt.ue8m0) sf = ue8m0(sf);
  const float inv = 1.0f / sf;
  for (std::int64_t r = 0; r < nr; ++r) codes(buffer + r * 128, nc, inv, times_unclamped, q + (r0 + r) * w.cols + c0);
  scales[bi * col_blocks + bj] = sf;
}

}  // namespace

void weight_kernel<fp8_per_block>::run(const input_view& w, const fp8::block_options& opt, std::uint8_t* q,
                                       float* scales, const cpu_options& o) {
  // Work items of 128 rows x up to 8 blocks (threads split wide slabs too). bf16 without NaN runs a
  // row at a time over the item's segments (amax bits, then codes); otherwise block by block through
  // a 128x128 float buffer. The working set is 64 KiB a thread whatever the matrix's width.
  constexpr std::int64_t blocks_per_item = 8;
  const std::int64_t row_blocks = (w.rows + 127) / 128, col_blocks = (w.cols + 127) / 128;
  const std::int64_t col_items = (col_blocks + blocks_per_item - 1) / blocks_per_item;
  const std::uint16_t* words = bf16_words(w);
  // Where an item's rows start: the row and column of its top-left element.
  const auto origin = [&](std::int64_t item) { return (item / col_items) * 128 * w.cols + (item % col_items) * blocks_per_item * 128; };
  parallel_ranges(row_blocks * col_items, o, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> buffer(static_cast<std::size_t>(128 * 128));
    for (std::int64_t item = first; item < last; ++item) {
      const std::int64_t bi = item / col_items, j0 = (item % col_items) * blocks_per_item;
      const std::int64_t nb = std::min(blocks_per_item, col_blocks - j0);
      const std::int64_t r0 = bi * 128, nr = std::min<std::int64_t>(128, w.rows - r0);
      const std::int64_t c0 = j0 * 128, nc = std::min<std::int64_t>(nb * 128, w.cols - c0);
      bool nan = words == nullptr;
      std::uint16_t acc[blocks_per_item] = {};
      if (!nan) segment_amax_bits(words + r0 * w.cols + c0, w.cols, nr, nc, 128, acc, &nan);
      if (nan) {
        for (std::int64_t j = 0; j < nb; ++j) block_by_floats(w, opt, bi, j0 + j, buffer.data(), q, scales, col_blocks);
        continue;
      }
      float inv[blocks_per_item];
      for (std::int64_t j = 0; j < nb; ++j) {
        const float a = max_nan(from_bf16(acc[j]), block_floor());
        float sf = opt.compiled_variant ? a * float_of(inv_448_bits) : a / max_e4m3;
        if (opt.ue8m0) sf = ue8m0(sf);
        inv[j] = 1.0f / sf;
        scales[bi * col_blocks + j0 + j] = sf;
      }
      // Each row's codes fetch the same row of the next item, whose amax pass then reads the cache.
      const std::uint16_t* next = item + 1 < last ? words + origin(item + 1) : nullptr;
      for (std::int64_t r = 0; r < nr; ++r)
        codes(words + (r0 + r) * w.cols + c0, nc, 128, inv, times_unclamped, q + (r0 + r) * w.cols + c0, next ? next + r * w.cols : nullptr);
    }
  });
}

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
    if (x.type == element::f32) bad += detail::non_finite_floats(static_cast<const std::uint32_t*>(at), count);
    else bad += detail::non_finite_words(static_cast<const std::uint16_t*>(at), count, x.type == element::bf16 ? 0x7F80 : 0x7C00);
    i += count;
  }
  return bad;
}

void activation_kernel<fp8_per_token>::run(const input_view& x, std::uint8_t* q, float* scales, const cpu_options& o) {
  row_scaled<false>(x, q, scales, o);
}

void activation_kernel<fp8_per_tensor_dynamic>::run(const input_view& x, std::uint8_t* q, float* scale,
                                                    const cpu_options& o) {
  const float s = tensor_amax(x, false, o) / max_e4m3;
  scale_rows_reciprocal(x, 1.0f / s, q, o);
  scale[0] = s;
}

void activation_kernel<fp8_per_block_dynamic>::run(const input_view& x, const fp8::group_options& opt,
                                                   std::uint8_t* q, float* scales, const cpu_options& o) {
  const std::int64_t groups = x.cols / opt.group_size;
  if (opt.layout == scale_layout::column_major_tma)
    std::fill_n(scales, scale_storage(opt.layout, x.rows, groups), 0.0f);
  const std::uint16_t* words = bf16_words(x);
  parallel_ranges(x.rows, o, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> row(static_cast<std::size_t>(x.cols)), y(static_cast<std::size_t>(groups));
    std::vector<std::uint16_t> acc(static_cast<std::size_t>(groups));
    for (std::int64_t m = first; m < last; ++m) {
      bool nan = words == nullptr;
      if (!nan) {  // bf16 without NaN: amax bits and codes per group from the words
        std::fill(acc.begin(), acc.end(), std::uint16_t{0});
        segment_amax_bits(words + m * x.cols, x.cols, 1, x.cols, opt.group_size, acc.data(), &nan);
      }
      if (!nan) {
        for (std::int64_t g = 0; g < groups; ++g) {
          const float a = max_num(group_eps(), from_bf16(acc[static_cast<std::size_t>(g)]));
          float yg = a / max_e4m3;
          if (opt.ue8m0) yg = ue8m0(max_num(abs_f32(yg), group_eps()));
          y[static_cast<std::size_t>(g)] = yg;
          scales[scale_offset(opt.layout, x.rows, groups, m, g)] = yg;
        }
        codes(words + m * x.cols, x.cols, opt.group_size, y.data(), over_group, q + m * x.cols,
              m + 1 < last ? words + (m + 1) * x.cols : nullptr);
        continue;
      }
      widen(x, m * x.cols, x.cols, row.data());
      for (std::int64_t g = 0; g < groups; ++g) {
        const float* in = row.data() + g * opt.group_size;
        const float a = max_num(group_eps(), amax_range(in, opt.group_size, false));
        float y = a / max_e4m3;
        if (opt.ue8m0) y = ue8m0(max_num(abs_f32(y), group_eps()));
        codes(in, opt.group_size, y, over_group, q + m * x.cols + g * opt.group_size);
        scales[scale_offset(opt.layout, x.rows, groups, m, g)] = y;
      }
    }
  });
}

}  // namespace qpolicy::cpu
