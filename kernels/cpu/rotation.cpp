#include "qpolicy/kernels/cpu/detail/rotation.hpp"

#include <cmath>

#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/kernels/cpu/detail/row_ops.hpp"
#include "qpolicy/numerics/detail/hadamard.hpp"

namespace qpolicy::cpu::detail {

hadamard_table::hadamard_table(std::int64_t n) : size(n), magnitude(n ? lp::hadamard_magnitude(n) : 0.0f) {
  if (n <= 0 || n > max_tabulated) return;
  entries.resize(static_cast<std::size_t>(n * n));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) entries[static_cast<std::size_t>(i * n + j)] = lp::hadamard_entry(i, j, magnitude);
}

namespace {

/// out[j] = round_d(sum_i fma chain of x[i] * h[i][j]) for one tabulated block: the chain runs over i for
/// all j at once, so each j's operations are the reference's in the same order.
QPOLICY_CPU_CLONES void rotate_block(const float* __restrict x, const float* __restrict h, std::int64_t n, float* __restrict acc) {
  for (std::int64_t j = 0; j < n; ++j) acc[j] = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float xi = x[i];
    const float* __restrict hi = h + i * n;
    for (std::int64_t j = 0; j < n; ++j) acc[j] = __builtin_fmaf(xi, hi[j], acc[j]);
  }
  for (std::int64_t j = 0; j < n; ++j) acc[j] = acc[j] + 0.0f;
}

}  // namespace

void rotate_row(const float* row, std::int64_t cols, const hadamard_table& h, element d, float* out) {
  const std::int64_t n = h.size;
  for (std::int64_t b = 0; b < cols; b += n) {
    if (!h.entries.empty()) {
      rotate_block(row + b, h.entries.data(), n, out + b);
      for (std::int64_t j = 0; j < n; ++j) out[b + j] = lp::round_to(d, out[b + j]);
    } else {
      for (std::int64_t j = 0; j < n; ++j) out[b + j] = lp::rotated(d, row + b, n, j, h.magnitude);
    }
  }
}

void rotate_rows(const input_view& x, std::int64_t size, float* out, unsigned threads) {
  const hadamard_table h(size);
  parallel_ranges(x.rows, threads, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> row(static_cast<std::size_t>(x.cols));
    for (std::int64_t r = first; r < last; ++r) {
      widen(x, r * x.cols, x.cols, row.data());
      rotate_row(row.data(), x.cols, h, x.type, out + r * x.cols);
    }
  });
}

}  // namespace qpolicy::cpu::detail
