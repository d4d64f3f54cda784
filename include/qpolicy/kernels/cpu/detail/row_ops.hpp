#pragma once
// Row operations the CPU fast kernels share: widening a run of input elements to float32 (defined in
// vectorized.cpp), and NaN-aware abs-max over a run, segments of rows or a whole tensor (amax.cpp).
#include <cstdint>

#include "qpolicy/numerics/tensor_view.hpp"

namespace qpolicy::cpu {
struct cpu_options;
}

namespace qpolicy::cpu::detail {

/// Widens elements [first, first + count) of x into `out`. 16-bit data at an odd address (safetensors
/// promises no alignment) goes through an aligned staging buffer, so the vector loops load aligned.
void widen(const input_view& x, std::int64_t first, std::int64_t count, float* out);

/// The abs-max of v[0..n): NaN-propagating (amaxT) when `propagate_nan`, NaN-ignoring (amaxN) otherwise.
float amax_range(const float* v, std::int64_t n, bool propagate_nan);

/// The amax bits of bf16 words in segments of `width` (the last may be shorter) of n words, over `rows`
/// rows `stride` words apart: segment j's largest magnitude bits folded into acc[j]; `nan` set when a
/// word is NaN (the caller then takes the float path, which picks the NaN as the reference does).
void segment_amax_bits(const std::uint16_t* words, std::int64_t stride, std::int64_t rows, std::int64_t n, std::int64_t width,
                       std::uint16_t* acc, bool* nan);

/// The amax of n bf16 words from their bits into `amax`; false when they hold a NaN (take the float path).
bool amax_bf16(const std::uint16_t* v, std::int64_t n, float* amax);

/// The abs-max of a whole tensor, rows split over threads.
float tensor_amax(const input_view& x, bool propagate_nan, const cpu_options& o);

}  // namespace qpolicy::cpu::detail
