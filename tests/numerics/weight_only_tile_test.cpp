// The weight-only GEMM's tile arithmetic (numerics/weight_only_tile.hpp), run on the CPU: an emulated
// CTA stages bf16 activations and weights dequantized by the kernel's own staging functions, gathers
// each lane's fragments with the kernel's loaders, multiplies them by an mma.sync m16n8k16 (bf16)
// written from PTX's element tables (independently of the loaders' register formulas) and stores
// outputs with the kernel's epilogue. For every weight formula the results meet spec §9's bound
// against float64, on a grouped problem with experts without rows, partial row tiles, and N and K
// that are not tile multiples.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "qpolicy/numerics/detail/weight_only_tile.hpp"
#include "weight_only_case.hpp"

namespace fp8 = qpolicy::fp8;
namespace wo = qpolicy::lp::weight_only;
namespace qp = qpolicy;
using qp::schemes::lp_formula;

namespace {

/// mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32 over a warp's 32 lanes' fragments, from PTX's tables:
/// A element i (half i % 2 of register i / 2) at row group + 8 when i is 2, 3, 6 or 7, column
/// 2 thread + (i & 1) + 8 when i >= 4; B element i at row 2 thread + (i & 1) + 8 when i >= 2, column
/// group; accumulator i at row group + 8 when i >= 2, column 2 thread + (i & 1). Each element must come
/// from exactly one lane.
void emulate_mma(const std::uint32_t (&a)[32][4], const std::uint32_t (&b)[32][2], std::array<float*, 32> c) {
  double A[16][16], B[16][8];
  int seen_a[16][16] = {}, seen_b[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    const int group = lane >> 2, thread = lane & 3;
    for (int i = 0; i < 8; ++i) {
      const int row = group + ((i == 2 || i == 3 || i == 6 || i == 7) ? 8 : 0), col = 2 * thread + (i & 1) + (i >= 4 ? 8 : 0);
      A[row][col] = fp8::from_bf16(static_cast<std::uint16_t>(a[lane][i / 2] >> (16 * (i % 2))));
      ++seen_a[row][col];
    }
    for (int i = 0; i < 4; ++i) {
      const int row = 2 * thread + (i & 1) + (i >= 2 ? 8 : 0);
      B[row][group] = fp8::from_bf16(static_cast<std::uint16_t>(b[lane][i / 2] >> (16 * (i % 2))));
      ++seen_b[row][group];
    }
  }
  bool once = true;
  for (auto& r : seen_a)
    for (int v : r) once = once && v == 1;
  for (auto& r : seen_b)
    for (int v : r) once = once && v == 1;
  REQUIRE(once);
  for (int lane = 0; lane < 32; ++lane) {
    const int group = lane >> 2, thread = lane & 3;
    for (int i = 0; i < 4; ++i) {
      const int row = group + (i >= 2 ? 8 : 0), col = 2 * thread + (i & 1);
      double d = 0;
      for (int k = 0; k < 16; ++k) d += A[row][k] * B[k][col];
      c[lane][i] += static_cast<float>(d);
    }
  }
}

/// The whole grouped GEMM of formula F through the emulated CTAs.
template <lp_formula F>
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
          for (int ks = 0; ks < wo::k_steps; ++ks)
            for (int mf = 0; mf < wo::m_frags; ++mf)
              for (int nf = 0; nf < wo::n_frags; ++nf) {
                std::uint32_t a[32][4], b[32][2];
                std::array<float*, 32> c{};
                for (int lane = 0; lane < 32; ++lane) {
                  wo::load_a(stage.data(), wm, mf, ks, lane, a[lane]);
                  wo::load_b(stage.data(), wn, nf, ks, lane, b[lane]);
                  c[static_cast<std::size_t>(lane)] = acc[static_cast<std::size_t>(warp * 32 + lane)].data() + wo::acc_index(mf, nf, 0);
                }
                emulate_mma(a, b, c);
              }
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

template <lp_formula F>
void check_formula(std::int64_t k) {
  const auto& f = qp::schemes::formula_of(F);
  INFO(f.name << ", K = " << k);
  REQUIRE(wo::can_implement(f, 200, k).empty());
  const qp::test::weight_only_case<F> c(k);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(c.rows * c.n), 0xFFFF);
  const auto p = c.problem(c.a.data(), c.codes.data(), c.scales.data(), c.row_scales.data(), c.tensor_scales.data(), c.a_scale.data(),
                           out.data());
  emulate<F>(p, qp::fp8::grouped::make_tiles(c.offsets, c.experts));
  std::string first;
  const auto bad = c.violations(out, first);
  INFO(first);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("weight-only GEMM tile arithmetic meets §9's bound for every weight formula", "[numerics][low_precision][gemm]") {
  check_formula<lp_formula::mxfp8_torch>(96);
  check_formula<lp_formula::mxfp4_even>(160);
  check_formula<lp_formula::int8_per_channel>(72);  // K not a multiple of the K tile
  check_formula<lp_formula::nvfp4_weight>(48);
}
