#pragma once
/// \file
/// Synthetic operands and error norms, for a program that tries a scheme before it has real weights
/// (the demo, the tests, the benchmarks): bf16 tensors of normal values with a few outliers, bf16
/// widened to float32, and the relative error of bf16 outputs against a float32 reference.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::synthetic {

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

/// bf16 values widened to float32 (exactly).
inline std::vector<float> widen(const std::vector<std::uint16_t>& bf16) {
  std::vector<float> out(bf16.size());
  for (std::size_t i = 0; i < bf16.size(); ++i) out[i] = fp8::from_bf16(bf16[i]);
  return out;
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

}  // namespace qpolicy::synthetic
