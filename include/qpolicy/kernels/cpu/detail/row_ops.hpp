#pragma once
// Row operations the CPU fast kernels share (defined in vectorized.cpp): widening a run of input
// elements to float32, and NaN-aware abs-max over a run or a whole tensor.
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

/// The abs-max of a whole tensor, rows split over threads.
float tensor_amax(const input_view& x, bool propagate_nan, const cpu_options& o);

}  // namespace qpolicy::cpu::detail
