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

/// Hadamard-32 and then MXFP4 EVEN (or RCEIL) of one bf16 row (cols a multiple of 32) in AVX-512 registers,
/// 16 blocks at a time: codes (cols / 2 bytes) and E8M0 scales (cols / 32, row-major), the bits of
/// rotate_row and the MXFP4 block function. Returns false, writing nothing, where the active CPU target
/// does not cover avx3: the caller runs those.
bool rotated_mxfp4_bf16_row(const std::uint16_t* row, std::int64_t cols, bool rceil, std::uint8_t* codes, std::uint8_t* scales);

/// Rotates every row of x into `out` (float32 values of dtype d's grid), rows split over threads.
void rotate_rows(const input_view& x, std::int64_t size, float* out, unsigned threads);

}  // namespace qpolicy::cpu::detail
