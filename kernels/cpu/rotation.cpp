#include "qpolicy/kernels/cpu/detail/rotation.hpp"

#include <cmath>
#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define QPOLICY_ROTATION_X86 1
#endif

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

/// `blocks` consecutive blocks of n columns.
void rotate_blocks(const float* x, const float* h, std::int64_t n, float* out, std::int64_t blocks) {
  for (std::int64_t b = 0; b < blocks; ++b) rotate_block(x + b * n, h, n, out + b * n);
}

#ifdef QPOLICY_ROTATION_X86
// Size 32 with explicit registers: the cloned loop above keeps its accumulators in memory (GCC's vectorizer
// does not promote an array), which halves the speed. Each lane is one output's chain, as above.

/// AVX-512: four blocks at a time, eight 16-lane accumulators (eight independent chains).
__attribute__((target("avx512f"))) void rotate_blocks32_avx512(const float* x, std::int64_t blocks, const float* h, float* out) {
  std::int64_t b = 0;
  const __m512 zero = _mm512_setzero_ps();
  for (; b + 4 <= blocks; b += 4) {
    __m512 acc[8];
    for (auto& a : acc) a = _mm512_setzero_ps();
    const float* xb = x + b * 32;
    for (int i = 0; i < 32; ++i) {
      const __m512 h0 = _mm512_loadu_ps(h + i * 32), h1 = _mm512_loadu_ps(h + i * 32 + 16);
      for (int k = 0; k < 4; ++k) {
        const __m512 v = _mm512_set1_ps(xb[k * 32 + i]);
        acc[2 * k] = _mm512_fmadd_ps(v, h0, acc[2 * k]);
        acc[2 * k + 1] = _mm512_fmadd_ps(v, h1, acc[2 * k + 1]);
      }
    }
    for (int k = 0; k < 8; ++k) _mm512_storeu_ps(out + b * 32 + k * 16, _mm512_add_ps(acc[k], zero));
  }
  if (b < blocks) rotate_blocks(x + b * 32, h, 32, out + b * 32, blocks - b);
}

/// AVX2 with FMA: two blocks at a time, eight 8-lane accumulators.
__attribute__((target("avx2,fma"))) void rotate_blocks32_avx2(const float* x, std::int64_t blocks, const float* h, float* out) {
  std::int64_t b = 0;
  const __m256 zero = _mm256_setzero_ps();
  for (; b + 2 <= blocks; b += 2) {
    __m256 acc[8];
    for (auto& a : acc) a = _mm256_setzero_ps();
    const float* xb = x + b * 32;
    for (int i = 0; i < 32; ++i) {
      __m256 hv[4];
      for (int q = 0; q < 4; ++q) hv[q] = _mm256_loadu_ps(h + i * 32 + q * 8);
      for (int k = 0; k < 2; ++k) {
        const __m256 v = _mm256_set1_ps(xb[k * 32 + i]);
        for (int q = 0; q < 4; ++q) acc[4 * k + q] = _mm256_fmadd_ps(v, hv[q], acc[4 * k + q]);
      }
    }
    for (int k = 0; k < 8; ++k) _mm256_storeu_ps(out + b * 32 + k * 8, _mm256_add_ps(acc[k], zero));
  }
  if (b < blocks) rotate_blocks(x + b * 32, h, 32, out + b * 32, blocks - b);
}
#endif

/// Size 32 on the widest of the above this CPU runs (the cloned loops when QPOLICY_CPU_ENCODER is
/// `portable`, so that tests check them on this machine too).
void rotate32(const float* x, std::int64_t blocks, const float* h, float* out) {
#ifdef QPOLICY_ROTATION_X86
  static const int isa = [] {
    const char* choice = std::getenv("QPOLICY_CPU_ENCODER");
    if (choice && std::string_view(choice) == "portable") return 0;
    return __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
  }();
  if (isa == 2) return rotate_blocks32_avx512(x, blocks, h, out);
  if (isa == 1) return rotate_blocks32_avx2(x, blocks, h, out);
#endif
  rotate_blocks(x, h, 32, out, blocks);
}

/// v[0..n) rounded to bf16 in place (fp8::to_bf16's bits, branch-free so it vectorizes).
QPOLICY_CPU_CLONES void round_bf16(float* __restrict v, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) v[i] = fp8::from_bf16(fp8::to_bf16(v[i]));
}

}  // namespace

void rotate_row(const float* row, std::int64_t cols, const hadamard_table& h, element d, float* out) {
  const std::int64_t n = h.size;
  if (n == 32) {
    rotate32(row, cols / 32, h.entries.data(), out);
  } else {
    for (std::int64_t b = 0; b < cols; b += n) {
      if (!h.entries.empty()) rotate_block(row + b, h.entries.data(), n, out + b);
      else
        for (std::int64_t j = 0; j < n; ++j)
          out[b + j] = lp::rotated_f32([&](std::int64_t i) { return row[b + i]; }, n, j, h.magnitude);
    }
  }
  if (d == element::bf16) round_bf16(out, cols);
  else if (d == element::f16)
    for (std::int64_t j = 0; j < cols; ++j) out[j] = lp::round_to(d, out[j]);
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
