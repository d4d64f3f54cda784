#include "qpolicy/kernels/cpu/gemm_reference.hpp"

#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::cpu::reference {

void gemm_scaled(const std::uint8_t* a, const float* a_scale, bool a_per_row, const std::uint8_t* w, const float* w_scale,
                 bool w_per_row, std::int64_t m, std::int64_t n, std::int64_t k, float* out) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;  // each product of two e4m3fn values is exact in float32
      for (std::int64_t t = 0; t < k; ++t) acc += fp8::decode(a[i * k + t]) * fp8::decode(w[j * k + t]);
      out[i * n + j] = acc * a_scale[a_per_row ? i : 0] * w_scale[w_per_row ? j : 0];
    }
}

void gemm_blocked(const std::uint8_t* a, const float* a_scale, const std::uint8_t* w, const float* w_scale,
                  std::int64_t m, std::int64_t n, std::int64_t k, float* out) {
  const std::int64_t chunks = k / 128;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::int64_t kb = 0; kb < chunks; ++kb) {
        float partial = 0.0f;
        for (std::int64_t t = kb * 128; t < kb * 128 + 128; ++t)
          partial += fp8::decode(a[i * k + t]) * fp8::decode(w[j * k + t]);
        acc += partial * a_scale[i * chunks + kb] * w_scale[(j / 128) * chunks + kb];
      }
      out[i * n + j] = acc;
    }
}

}  // namespace qpolicy::cpu::reference
