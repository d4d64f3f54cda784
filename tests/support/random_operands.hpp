#pragma once
// Random operands for the tests and the benchmarks: bf16 tensors of normal values (weights and
// activations; qpolicy/numerics/synthetic.hpp draws them, as for the demo), finite e4m3fn codes and
// positive scales (GEMM operands).
#include <cstdint>
#include <random>
#include <vector>

#include "qpolicy/numerics/synthetic.hpp"
#include "qpolicy/numerics/tensor_view.hpp"

namespace qpolicy::test {

using synthetic::random_bf16;
using synthetic::relative_error;
using synthetic::widen;

/// A row-major bf16 tensor.
struct bf16_tensor {
  std::int64_t rows, cols;
  std::vector<std::uint16_t> bits;
  qpolicy::input_view view() const { return {bits.data(), qpolicy::element::bf16, rows, cols}; }
  std::vector<float> floats() const { return widen(bits); }
};

/// A [rows, cols] bf16 tensor of N(0, sd) values with an outlier every 997 elements, as real weights.
inline bf16_tensor random_bf16(std::int64_t rows, std::int64_t cols, float sd, std::mt19937& rng) {
  return {rows, cols, random_bf16(static_cast<std::size_t>(rows * cols), sd, rng, 997)};
}

/// An input of any element type the kernels read: its float32 values, and for bf16 and fp16 its bits.
struct typed_input {
  qpolicy::element type;
  std::int64_t rows, cols;
  std::vector<std::uint16_t> half;
  std::vector<float> full;
  qpolicy::input_view view() const {
    return {type == qpolicy::element::f32 ? static_cast<const void*>(full.data()) : half.data(), type, rows, cols};
  }
};

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
