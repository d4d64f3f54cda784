#pragma once
// Random operands for the tests, the benchmarks and the demo: bf16 tensors of normal values (weights
// and activations), finite e4m3fn codes and positive scales (GEMM operands).
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::test {

/// `n` bf16 values drawn from N(0, sd), rounded to nearest. With `outlier_every` > 0, elements 0,
/// outlier_every, 2 outlier_every... are 8 times larger, as real weights have outliers.
inline std::vector<std::uint16_t> random_bf16(std::size_t n, float sd, std::mt19937& rng, std::size_t outlier_every = 0) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<std::uint16_t> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    float x = d(rng);
    if (outlier_every && i % outlier_every == 0) x *= 8.0f;
    v[i] = fp8::to_bf16(x);
  }
  return v;
}

/// `n` random e4m3fn codes, never NaN (0x7F / 0xFF).
inline std::vector<std::uint8_t> random_codes(std::size_t n, std::mt19937& rng) {
  std::vector<std::uint8_t> v(n);
  for (auto& c : v) {
    unsigned x = static_cast<unsigned>(rng() % 254);
    if (x >= 0x7F) ++x;
    c = static_cast<std::uint8_t>(x);
  }
  return v;
}

/// `n` random scales in [lo, hi).
inline std::vector<float> random_scales(std::size_t n, std::mt19937& rng, float lo = 1e-4f, float hi = 2e-2f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& s : v) s = d(rng);
  return v;
}

/// ||out - ref|| / ||ref|| of bf16 outputs against a float32 reference; NaN when any output is NaN.
inline double relative_error(const std::vector<std::uint16_t>& out, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double o = fp8::from_bf16(out[i]);
    if (std::isnan(o)) return std::nan("");
    num += (o - ref[i]) * (o - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

}  // namespace qpolicy::test
