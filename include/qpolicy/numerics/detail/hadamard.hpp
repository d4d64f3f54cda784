#pragma once
// The Hadamard rotation of new-schemes-numerics.md §A.2-A.3, element by element: each `size`-column block
// of a row times the normalized Sylvester matrix, y[j] = sum_i x[i] H[i][j], in float32 and rounded once to
// the model dtype D. __host__ __device__: the CPU fast path, the CPU reference and the CUDA kernels compute
// the same bits from these.
//
// The float32 sum is torch-CPU's order, which the vectors record: one fused multiply-add per term in i
// order from +0, a zero result +0 (a BLAS epilogue's C = acc + 0). Every element of the public vectors
// equals it; cuBLAS's order is UNCONFIRMED (docs/architecture.md, "New schemes").
#include <cmath>
#include <cstdint>

#include "qpolicy/numerics/block_formats.hpp"
#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::lp {

/// Whether `n` is a Hadamard size: a power of two (hadamard_size's rule).
QPOLICY_HD bool is_hadamard_size(std::int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

/// The magnitude of every entry of the normalized n x n matrix: f32(1) / f32(sqrt(n)), as torch divides a
/// float32 tensor by the Python float n ** 0.5 (±0x3E3504F3 for n = 32).
QPOLICY_HD float hadamard_magnitude(std::int64_t n) {
  return 1.0f / static_cast<float>(std::sqrt(static_cast<double>(n)));
}

/// Whether entry (i, j) of the Sylvester matrix is negative: (-1)^popcount(i & j).
QPOLICY_HD bool hadamard_negative(std::int64_t i, std::int64_t j) {
  std::uint64_t v = static_cast<std::uint64_t>(i & j);
  v ^= v >> 32;
  v ^= v >> 16;
  v ^= v >> 8;
  v ^= v >> 4;
  v ^= v >> 2;
  v ^= v >> 1;
  return (v & 1u) != 0;
}

/// Entry (i, j) of the normalized matrix with entries of magnitude `c`.
QPOLICY_HD float hadamard_entry(std::int64_t i, std::int64_t j, float c) { return hadamard_negative(i, j) ? -c : c; }

/// One rotated element in float32: column j of a block whose element i is load(i) (widened exactly),
/// torch-CPU's order.
template <class Load>
QPOLICY_HD float rotated_f32(Load load, std::int64_t n, std::int64_t j, float c) {
  float acc = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) acc = std::fma(load(i), hadamard_entry(i, j, c), acc);
  return acc + 0.0f;  // -0 becomes +0, as the BLAS's stored result
}

}  // namespace qpolicy::lp
