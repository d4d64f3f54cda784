// The weight-only GEMM's tile arithmetic (numerics/weight_only_tile.hpp), run on the CPU: an emulated
// CTA stages bf16 activations and weights dequantized by the kernel's own staging functions, gathers
// each lane's fragments with the kernel's loaders, multiplies them by an emulated mma.sync m16n8k16
// (bf16; tests/support/mma_emulation.hpp) and stores outputs with the kernel's epilogue. For every
// weight formula the results meet spec §9's bound against float64, on a grouped problem with experts
// without rows, partial row tiles, and N and K that are not tile multiples.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "qpolicy/numerics/detail/weight_only_tile.hpp"
#include "../support/mma_emulation.hpp"
#include "weight_only_case.hpp"

namespace fp8 = qpolicy::fp8;
namespace wo = qpolicy::lp::weight_only;
namespace qp = qpolicy;
using qp::schemes::formula;

namespace {

/// The whole grouped GEMM of formula F through the emulated CTAs.
template <formula F>
void emulate(const wo::problem& p, const std::vector<wo::tile>& tiles) {
  std::vector<std::uint16_t> stage(wo::stage_elements);
  for (const auto& t : tiles)
    for (std::int64_t n0 = 0; n0 < p.n; n0 += wo::tile_n) {
      std::vector<std::array<float, wo::accumulators>> acc(wo::threads, std::array<float, wo::accumulators>{});
      for (std::int64_t kt = 0; kt * wo::tile_k < p.k; ++kt) {
        for (int idx = 0; idx < wo::tile_m * wo::tile_k; ++idx) stage[wo::stage_offset(false, idx)] = wo::stage_a(p, t, kt, idx);
        for (int idx = 0; idx < wo::tile_n * wo::tile_k; ++idx) stage[wo::stage_offset(true, idx)] = wo::stage_w<F>(p, t.expert, n0, kt, idx);
        for (int warp = 0; warp < wo::warps_m * wo::warps_n; ++warp) {
          const int wm = warp / wo::warps_n, wn = warp % wo::warps_n;
          qpolicy::test::emulate_warp_tile<qpolicy::test::mma_m16n8k16_bf16>(
              wo::k_steps, wo::m_frags, wo::n_frags,
              [&](int mf, int ks, int lane, auto& regs) { wo::load_a(stage.data(), wm, mf, ks, lane, regs); },
              [&](int nf, int ks, int lane, auto& regs) { wo::load_b(stage.data(), wn, nf, ks, lane, regs); },
              [&](int mf, int nf, int lane) { return acc[static_cast<std::size_t>(warp * 32 + lane)].data() + wo::acc_index(mf, nf, 0); });
        }
      }
      for (int warp = 0; warp < wo::warps_m * wo::warps_n; ++warp)
        for (int lane = 0; lane < 32; ++lane) {
          float lane_acc[wo::accumulators];
          std::copy(acc[static_cast<std::size_t>(warp * 32 + lane)].begin(), acc[static_cast<std::size_t>(warp * 32 + lane)].end(), lane_acc);
          wo::store_outputs(p, t, n0, warp / wo::warps_n, warp % wo::warps_n, lane, lane_acc);
        }
    }
}

template <formula F>
void check_formula(std::int64_t k) {
  const auto& f = qp::schemes::formula_of(F);
  INFO(f.name << ", K = " << k);
  REQUIRE(wo::can_implement(f, 200, k).empty());
  const qp::test::weight_only_case<F> c(k);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(c.rows * c.n), 0xFFFF);
  const auto p = c.problem(c.a.data(), c.codes.data(), c.scales.data(), c.row_scales.data(), c.tensor_scales.data(), c.a_scale.data(),
                           out.data(), c.codebooks.data());
  emulate<F>(p, qp::fp8::grouped::make_tiles(c.offsets, c.experts));
  std::string first;
  const auto bad = c.violations(out, first);
  INFO(first);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("weight-only GEMM tile arithmetic meets §9's bound for every weight formula", "[numerics][low_precision][gemm]") {
  check_formula<formula::mxfp8_torch>(96);
  check_formula<formula::mxfp4_even>(160);
  check_formula<formula::int8_per_channel>(72);  // K not a multiple of the K tile
  check_formula<formula::nvfp4_weight>(48);
  check_formula<formula::lut_b>(192);  // LUT-B tiles decoded per K panel (8x64 tiles, 32-wide K steps)
}
