#pragma once
// Random GEMM operands for the GEMM tests (CPU and GPU): finite e4m3fn codes and positive scales.
#include <cstdint>
#include <random>
#include <vector>

namespace qpolicy::test {

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

}  // namespace qpolicy::test
