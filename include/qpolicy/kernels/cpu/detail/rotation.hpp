#pragma once
// The Hadamard rotation of a widened row on the CPU (new-schemes-numerics.md §A.3), vectorized across a
// block's output columns: each output is the fused multiply-add chain of numerics/detail/hadamard.hpp
// in the same order, so the bits are the reference's. Defined in kernels/cpu/rotation.cpp.
#include <cstdint>
#include <vector>

#include "qpolicy/numerics/tensor_view.hpp"

namespace qpolicy::cpu::detail {

/// The signed entries of the normalized size x size matrix, row-major, for the sizes small enough to
/// tabulate (larger sizes compute each sign on the fly); size 0 is no rotation.
struct hadamard_table {
  std::int64_t size = 0;
  float magnitude = 0.0f;
  std::vector<float> entries;  // [size, size] when size <= max_tabulated
  static constexpr std::int64_t max_tabulated = 256;
  explicit hadamard_table(std::int64_t n);
};

/// Rotates each size-column block of row[0..cols) into out, rounded once to d (cols a multiple of the size).
void rotate_row(const float* row, std::int64_t cols, const hadamard_table& h, element d, float* out);

/// Rotates every row of x into `out` (float32 values of dtype d's grid), rows split over threads.
void rotate_rows(const input_view& x, std::int64_t size, float* out, unsigned threads);

}  // namespace qpolicy::cpu::detail
