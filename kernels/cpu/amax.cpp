// The abs-max passes of the CPU fast kernels (row_ops.hpp): over widened floats (NaN-propagating or
// NaN-ignoring), over bf16 words from their bits (whole runs, or segments of rows), and over a whole
// tensor split over threads.
#include <algorithm>
#include <cstring>
#include <vector>

#include "block_rows.hpp"
#include "qpolicy/kernels/cpu/detail/e4m3_encoder.hpp"
#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/kernels/cpu/detail/row_ops.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"
#include "qpolicy/numerics/numerics.hpp"
#include "qpolicy/kernels/cpu/detail/isa.hpp"
#include "quantize_rows.hpp"

namespace qpolicy::cpu::detail {

using namespace fp8;

// On the bits: a magnitude's bits order like its value, and NaN bits exceed infinity's, so the max is
// an integer max in vector lanes (quantize_rows.cpp; max is exact and order-free, so lanes change no
// result) with NaNs left out and reported. When NaNs propagate, the rare NaN case rescans for the first
// one, which is what the scalar fold returns.
float amax_range(const float* v, std::int64_t n, bool propagate_nan) {
  bool nan = false;
  const std::uint32_t a = magnitude_bits_f32(v, n, &nan);
  if (propagate_nan && nan)
    for (std::int64_t k = 0; k < n; ++k)
      if (v[k] != v[k]) return abs_f32(v[k]);
  return float_of(a);
}

// The amax of bf16 values on their bits, without widening: a magnitude's 15 bits order like its value,
// so the widest is the largest, and widening it afterwards is exact. NaN bits (above infinity's 0x7F80)
// are reported, for the caller to take the float path that picks the NaN. AVX-512 registers over
// several rows where the active target covers avx3, else the portable pass row by row.
void segment_amax_bits(const std::uint16_t* words, std::int64_t stride, std::int64_t rows, std::int64_t n, std::int64_t width,
                       std::uint16_t* acc, bool* nan) {
#if QPOLICY_X86_KERNELS
  if (has_avx512_kernels()) {
    rows::segment_amax_bits_avx512(words, stride, rows, n, width, acc, nan);
    return;
  }
#endif
  for (std::int64_t r = 0; r < rows && !*nan; ++r) magnitude_bits_bf16(words + r * stride, n, width, acc, nan);
}

bool amax_bf16(const std::uint16_t* v, std::int64_t n, float* amax) {
  bool nan = false;
  std::uint16_t bits = 0;
#if QPOLICY_X86_KERNELS
  if (has_avx512_kernels()) rows::segment_amax_bits_avx512(v, n, 1, n, n, &bits, &nan);
  else
#endif
    magnitude_bits_bf16(v, n, n, &bits, &nan);
  *amax = from_bf16(bits);
  return !nan;
}

float tensor_amax(const input_view& x, bool propagate_nan, const cpu_options& o) {
  const unsigned n = detail::thread_count(o.threads, x.rows);
  std::vector<float> partial(n, 0.0f);
  const std::int64_t chunk = (x.rows + n - 1) / n;
  const bool bits = x.type == element::bf16 && reinterpret_cast<std::uintptr_t>(x.data) % 2 == 0;
  detail::parallel_ranges(x.rows, o.threads, [&](std::int64_t first, std::int64_t last) {
    if (bits) {  // NaN-free bf16 (almost every weight): one pass over the bits of the whole range
      float a = 0.0f;
      if (amax_bf16(static_cast<const std::uint16_t*>(x.data) + first * x.cols, (last - first) * x.cols, &a)) {
        partial[static_cast<std::size_t>(chunk ? first / chunk : 0)] = a;
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

}  // namespace qpolicy::cpu::detail
