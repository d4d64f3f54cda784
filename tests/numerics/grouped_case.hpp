#pragma once
// Random grouped GEMMs (every expert of a MoE projection at once) and spec §10's accuracy bound
// against a float64 reference: shared by the CPU emulation of the grouped kernel
// (grouped_tile_test.cpp) and the GPU test that runs the kernel itself.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "qpolicy/numerics/detail/grouped_tile.hpp"
#include "../support/random_operands.hpp"

namespace qpolicy::test {

/// A random grouped GEMM: expert e owns rows [offsets[e], offsets[e + 1]); codes and scales laid out
/// as the kernel reads them (block grids with cuBLASLt's padded row stride, as uploaded MoE layers).
struct grouped_case {
  std::int64_t experts = 0, n = 0, k = 0, rows = 0;
  fp8::activation_quant activation{};
  fp8::weight_scales weights{};
  std::vector<std::int64_t> offsets;
  std::vector<std::uint8_t> a, w;
  std::vector<float> a_scale, w_scale;
  std::int64_t w_step = 0, w_stride = 0;

  /// The problem over the given copies of a, w and the scales (host or device), writing `out`.
  fp8::grouped::problem problem(const std::uint8_t* a_ptr, const std::uint8_t* w_ptr, const float* as, const float* ws,
                                std::uint16_t* out) const {
    return {a_ptr, w_ptr, as, ws, w_step, w_stride, out, n, k, activation, weights};
  }
  std::string name() const {
    std::string s(fp8::name_of(activation));
    s += " x ";
    s += fp8::name_of(weights);
    // Appends one piece at a time: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string temporaries.
    for (const std::string& piece : {std::string(", N="), std::to_string(n), std::string(" K="), std::to_string(k),
                                     std::string(", rows per expert")})
      s += piece;
    for (std::int64_t e = 0; e < experts; ++e) {
      s += ' ';
      s += std::to_string(offsets[e + 1] - offsets[e]);
    }
    return s;
  }
};

inline grouped_case make_grouped_case(const std::vector<std::int64_t>& rows_per_expert, std::int64_t n, std::int64_t k,
                                      fp8::activation_quant act, fp8::weight_scales weights, std::mt19937& rng) {
  grouped_case c;
  c.experts = static_cast<std::int64_t>(rows_per_expert.size());
  c.n = n;
  c.k = k;
  c.activation = act;
  c.weights = weights;
  c.offsets.push_back(0);
  for (auto r : rows_per_expert) c.offsets.push_back(c.offsets.back() + r);
  c.rows = c.offsets.back();
  c.a = random_codes(static_cast<std::size_t>(c.rows * k), rng);
  c.w = random_codes(static_cast<std::size_t>(c.experts * n * k), rng);
  const std::int64_t a_scales = act == fp8::activation_quant::per_tensor  ? c.experts
                                : act == fp8::activation_quant::per_token ? c.rows
                                                                          : c.rows * (k / 128);
  c.a_scale = random_scales(static_cast<std::size_t>(a_scales), rng);
  switch (weights) {
    case fp8::weight_scales::per_tensor: c.w_step = 1; break;
    case fp8::weight_scales::per_channel: c.w_step = n; break;
    case fp8::weight_scales::block_128x128:
      c.w_stride = fp8::cublaslt_block_scale_stride(k);
      c.w_step = (n + 127) / 128 * c.w_stride;
      break;
  }
  c.w_scale = random_scales(static_cast<std::size_t>(c.experts * c.w_step), rng);
  return c;
}

/// The edge cases both the CPU emulation and the GPU run: experts without rows, with one row, a full
/// tile and one more; N and K past a tile's edge; K down to one mma step; every scaling.
inline std::vector<grouped_case> grouped_edge_cases(std::mt19937& rng) {
  using fp8::activation_quant;
  using fp8::weight_scales;
  const std::vector<std::int64_t> rows = {0, 1, 129, 7, 0, 140};
  return {make_grouped_case(rows, 200, 208, activation_quant::per_tensor, weight_scales::per_tensor, rng),
          make_grouped_case(rows, 136, 144, activation_quant::per_token, weight_scales::per_channel, rng),
          make_grouped_case(rows, 130, 32, activation_quant::per_tensor, weight_scales::per_channel, rng),
          make_grouped_case(rows, 136, 16, activation_quant::per_token, weight_scales::per_tensor, rng),
          make_grouped_case(rows, 200, 384, activation_quant::group_128, weight_scales::block_128x128, rng),
          make_grouped_case({3, 0, 256}, 384, 640, activation_quant::group_128, weight_scales::block_128x128, rng)};
}

/// Empty when every output of `out` (bf16 [rows, n]) meets spec §10's bound |out - ref| <= ulp_bf16(ref)
/// + K 2^-24 T against the float64 reference, else the first output that misses it.
inline std::string check_grouped_bound(const grouped_case& c, const std::vector<std::uint16_t>& out) {
  const bool blocked = c.weights == fp8::weight_scales::block_128x128;
  const fp8::grouped::problem p = c.problem(c.a.data(), c.w.data(), c.a_scale.data(), c.w_scale.data(), nullptr);
  for (std::int32_t e = 0; e < c.experts; ++e)
    for (std::int64_t r = c.offsets[e]; r < c.offsets[e + 1]; ++r)
      for (std::int64_t j = 0; j < c.n; ++j) {
        const std::uint8_t* ar = c.a.data() + r * c.k;
        const std::uint8_t* wr = c.w.data() + (e * c.n + j) * c.k;
        double ref = 0, t = 0;
        const std::int64_t chunk = blocked ? 128 : c.k;
        for (std::int64_t k0 = 0; k0 < c.k; k0 += chunk) {
          double sum = 0, mag = 0;
          for (std::int64_t kk = k0; kk < k0 + chunk; ++kk) {
            const double v = static_cast<double>(fp8::decode(ar[kk])) * fp8::decode(wr[kk]);
            sum += v;
            mag += std::fabs(v);
          }
          const double s = static_cast<double>(fp8::grouped::a_scale_of(p, e, r, k0 / 128)) *
                           fp8::grouped::w_scale_of(p, e, j, k0 / 128);
          ref += sum * s;
          t += mag * s;
        }
        const double ulp = ref == 0 ? 0 : std::ldexp(1.0, std::ilogb(ref) - 7);
        const double got = fp8::from_bf16(out[static_cast<std::size_t>(r * c.n + j)]);
        const double bound = ulp + static_cast<double>(c.k) * std::ldexp(t, -24);
        if (!(std::fabs(got - ref) <= bound))
          return c.name() + ": out[" + std::to_string(r) + ", " + std::to_string(j) + "] = " + std::to_string(got) +
                 ", reference " + std::to_string(ref) + ", bound " + std::to_string(bound);
      }
  return {};
}

}  // namespace qpolicy::test
