#pragma once
// One grouped weight-only GEMM problem per weight formula, for the CPU emulation of the kernel's tile
// arithmetic (weight_only_tile_test.cpp) and for the CUDA kernel (tests/gpu/weight_only_gpu_test.cpp):
// four experts (one without rows, one with a partial second row tile), N = 200 and a K the test
// chooses, random bf16 activations and per-row scales, weights quantized by the formula's CPU fast
// kernel; and spec §9's bound on a result. No test framework: nvcc alone builds the GPU side.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "qpolicy/kernels/cpu/block_quantizer.hpp"
#include "qpolicy/numerics/detail/weight_only_tile.hpp"

namespace qpolicy::test {

template <schemes::formula F>
struct weight_only_case {
  static constexpr std::int64_t experts = 4, n = 200;
  std::int64_t k;
  std::int64_t offsets[experts + 1] = {0, 5, 5, 150, 170};
  std::int64_t rows = 170, code_step = 0, scale_step = 0, codebook_step = 0;
  std::vector<std::uint16_t> a, w;
  std::vector<float> a_scale, row_scales, tensor_scales;
  std::vector<std::uint8_t> codes, scales, codebooks;  // codebooks: LUT-B's
  static constexpr bool int8 = F == schemes::formula::int8_per_channel, nvfp4 = F == schemes::formula::nvfp4_weight;

  explicit weight_only_case(std::int64_t k_) : k(k_) {
    const auto& f = schemes::formula_of(F);
    std::mt19937 rng(static_cast<unsigned>(F) * 7 + static_cast<unsigned>(k));
    std::normal_distribution<float> normal;
    a.resize(static_cast<std::size_t>(rows * k));
    for (auto& v : a) v = fp8::to_bf16(normal(rng));
    a_scale.resize(static_cast<std::size_t>(rows));
    for (auto& s : a_scale) s = 0.5f + 0.01f * static_cast<float>(rng() % 100);
    w.resize(static_cast<std::size_t>(experts * n * k));
    for (auto& v : w) v = fp8::to_bf16(normal(rng) * 0.05f);
    code_step = schemes::code_bytes(f, n, k);
    scale_step = schemes::scale_count(f, n, k);
    codebook_step = f.second == schemes::second_scale::codebook ? scale_step * schemes::lut_codebook_size : 0;
    codes.resize(static_cast<std::size_t>(experts * code_step));
    scales.resize(static_cast<std::size_t>(experts * scale_step));
    codebooks.resize(static_cast<std::size_t>(experts * codebook_step));
    row_scales.resize(static_cast<std::size_t>(experts * n));
    tensor_scales.resize(static_cast<std::size_t>(experts));
    for (std::int64_t e = 0; e < experts; ++e) {
      void* s = int8 ? static_cast<void*>(row_scales.data() + e * n) : scales.data() + e * scale_step;
      cpu::block_quantizer<formula_tag<F>>::run({w.data() + e * n * k, qpolicy::element::bf16, n, k},
                                                {codes.data() + e * code_step, s, tensor_scales.data() + e,
                                                 codebook_step ? codebooks.data() + e * codebook_step : nullptr});
    }
  }

  /// The problem over the given copies of the operands (host or device pointers).
  lp::weight_only::problem problem(const std::uint16_t* a_p, const std::uint8_t* codes_p, const std::uint8_t* scales_p,
                                   const float* row_scales_p, const float* tensor_scales_p, const float* a_scale_p,
                                   std::uint16_t* out, const std::uint8_t* codebooks_p = nullptr) const {
    return {a_p, codes_p, int8 ? nullptr : scales_p, int8 ? row_scales_p : nullptr, nvfp4 ? tensor_scales_p : nullptr,
            nvfp4 ? a_scale_p : nullptr, code_step, scale_step, out, n, k, nullptr, codebook_step ? codebooks_p : nullptr, codebook_step};
  }

  /// Outputs [rows, n] (bf16) outside §9's bound against float64: |out - ref| <= ulp_bf16(ref) +
  /// (K + 4) 2^-24 T; the first few described in `first`.
  std::int64_t violations(const std::vector<std::uint16_t>& out, std::string& first) const {
    std::int64_t bad = 0;
    for (std::int64_t e = 0; e < experts; ++e)
      for (std::int64_t r = offsets[e]; r < offsets[e + 1]; ++r)
        for (std::int64_t j = 0; j < n; ++j) {
          double ref = 0, terms = 0;
          for (std::int64_t t = 0; t < k; ++t) {
            const double prod = double(fp8::from_bf16(a[static_cast<std::size_t>(r * k + t)])) *
                                lp::weight_operand<F>(codes.data() + e * code_step, scales.data() + e * scale_step, k, j, t,
                                                      codebooks.data() + e * codebook_step);
            ref += prod;
            terms += std::fabs(prod);
          }
          double outer = 1;
          if (nvfp4) outer = double(a_scale[static_cast<std::size_t>(r)]) * tensor_scales[static_cast<std::size_t>(e)];
          if (int8) outer = row_scales[static_cast<std::size_t>(e * n + j)];
          ref *= outer;
          terms *= std::fabs(outer);
          const double got = fp8::from_bf16(out[static_cast<std::size_t>(r * n + j)]);
          const double ulp = ref == 0 ? 0x1p-133 : std::ldexp(1.0, std::ilogb(ref) - 7);
          if (!(std::fabs(got - ref) <= ulp + double(k + 4) * std::ldexp(terms, -24)) && ++bad <= 3)
            first += "expert " + std::to_string(e) + " row " + std::to_string(r) + " col " + std::to_string(j) + ": " +
                     std::to_string(got) + " vs " + std::to_string(ref) + "\n";
        }
    return bad;
  }
};

}  // namespace qpolicy::test
