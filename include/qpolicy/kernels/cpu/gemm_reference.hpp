#pragma once
// The CPU reference of the FP8 GEMMs (spec §10), float32 accumulation: the oracle for the fast CPU
// and CUDA GEMMs of the forward passes. A is [M, K] codes, W is [N, K] codes (TN), out is [M, N].
#include <cstdint>

namespace qpolicy::cpu::reference {

/// out[m,n] = (sum_k dq(A[m,k]) dq(W[n,k])) * a_scale[m or 0] * w_scale[n or 0]; `a_per_row` / `w_per_row`
/// say whether the scales have one entry per row (per-token / per-channel) or one in all (per-tensor).
void gemm_scaled(const std::uint8_t* a, const float* a_scale, bool a_per_row, const std::uint8_t* w, const float* w_scale,
                 bool w_per_row, std::int64_t m, std::int64_t n, std::int64_t k, float* out);

/// 1x128 activation groups with 128x128 weight blocks: each 128-wide K chunk's partial sum is scaled
/// by A_s[m, kb] * W_s[n/128, kb] before it is added. a_scale row-major [M, K/128]; w_scale row-major
/// [ceil(N/128), K/128]; K a multiple of 128.
void gemm_blocked(const std::uint8_t* a, const float* a_scale, const std::uint8_t* w, const float* w_scale,
                  std::int64_t m, std::int64_t n, std::int64_t k, float* out);

}  // namespace qpolicy::cpu::reference
