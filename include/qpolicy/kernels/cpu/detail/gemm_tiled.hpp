#pragma once
// The CPU FP8 GEMMs of the forward passes: the formulas of gemm_reference (spec §10) with the same
// float32 operations in the same order per output, so the results are bit-identical to the
// reference; blocked (W decoded into 128 x 32 float panels, four A rows per pass) and split over
// threads by (32-column block, 64-row block). A is [M, K] codes, W is [N, K] codes (TN), out [M, N].
#include <cstdint>

namespace qpolicy::cpu {

/// Threads a GEMM may use (0: the hardware's count).
struct gemm_options {
  unsigned threads = 0;
};

/// out[m,n] = (sum_k dq(A[m,k]) dq(W[n,k])) * a_scale[m or 0] * w_scale[n or 0] (+ bias[n] when given).
void gemm_scaled(const std::uint8_t* a, const float* a_scale, bool a_per_row, const std::uint8_t* w,
                 const float* w_scale, bool w_per_row, std::int64_t m, std::int64_t n, std::int64_t k, float* out,
                 const float* bias = nullptr, const gemm_options& options = {});

/// 1x128 activation groups with 128x128 weight blocks (K a multiple of 128): each chunk's partial
/// sum times A_s[m, kb] * W_s[n/128, kb] is added to the accumulator (+ bias[n] when given).
/// a_scale row-major [M, K/128]; w_scale row-major [ceil(N/128), K/128].
void gemm_blocked(const std::uint8_t* a, const float* a_scale, const std::uint8_t* w, const float* w_scale,
                  std::int64_t m, std::int64_t n, std::int64_t k, float* out, const float* bias = nullptr,
                  const gemm_options& options = {});

/// The baseline of the benchmarks: the same blocked kernel on float32 operands (out = A W^T).
void gemm_f32(const float* a, const float* w, std::int64_t m, std::int64_t n, std::int64_t k, float* out,
              const gemm_options& options = {});

}  // namespace qpolicy::cpu
