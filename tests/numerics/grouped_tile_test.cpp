// The grouped FP8 GEMM's tile arithmetic (fp8/grouped_tile.hpp), run on the CPU: an emulated CTA
// stages tiles with the kernel's chunk map, gathers each lane's fragments with the kernel's loaders,
// multiplies them by an emulated mma.sync m16n8k32 (tests/support/mma_emulation.hpp), folds block
// scales and stores outputs with the kernel's functions. The results must meet spec §10's bound against float64 on shapes that exercise every edge: experts
// without rows, partial row tiles, N and K that are not tile multiples.
#include <catch2/catch.hpp>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "../support/mma_emulation.hpp"
#include "grouped_case.hpp"

namespace fp8 = qpolicy::fp8;
namespace g = qpolicy::fp8::grouped;
using qpolicy::test::grouped_case;

namespace {

/// Every CTA of the grouped GEMM, emulated lane by lane.
template <class Scaling>
void emulate_grouped(const g::problem& p, const std::vector<g::tile>& tiles) {
  constexpr bool blocked = std::is_same_v<Scaling, g::block_scales>;
  constexpr int warps = g::threads / 32;
  std::vector<std::uint8_t> stage(g::stage_bytes);
  std::vector<std::array<std::array<float, g::accumulators>, 32>> acc(warps), partial(warps);
  const std::int64_t k_tiles = (p.k + g::tile_k - 1) / g::tile_k;
  for (const g::tile& t : tiles)
    for (std::int64_t n0 = 0; n0 < p.n; n0 += g::tile_n) {
      for (auto& w : acc)
        for (auto& l : w) l.fill(0.0f);
      for (std::int64_t kt = 0; kt < k_tiles; ++kt) {
        std::fill(stage.begin(), stage.end(), std::uint8_t{0xAA});  // any byte the map misses shows up
        std::vector<int> written(g::stage_bytes, 0);
        for (int c = 0; c < g::chunks; ++c) {
          const g::chunk ch = g::chunk_of(c);
          const g::chunk_source src = g::source_of(ch, p, t, n0, kt);
          std::uint8_t* dst = stage.data() + ch.smem_offset();
          if (src.valid) std::memcpy(dst, (ch.weight ? p.w : p.a) + src.offset, 16);
          else std::memset(dst, 0, 16);
          for (int i = 0; i < 16; ++i) ++written[static_cast<std::size_t>(ch.smem_offset() + i)];
        }
        bool exact = true;  // each staged byte of a row written once, the padding never
        for (int row = 0; row < g::tile_m + g::tile_n; ++row)
          for (int col = 0; col < g::smem_row; ++col)
            exact = exact && written[static_cast<std::size_t>(row * g::smem_row + col)] == (col < g::tile_k ? 1 : 0);
        REQUIRE(exact);
        for (int warp = 0; warp < warps; ++warp) {
          const int wm = warp / g::warps_n, wn = warp % g::warps_n;
          auto& sums = blocked ? partial[warp] : acc[warp];
          if (blocked)
            for (auto& l : sums) l.fill(0.0f);
          qpolicy::test::emulate_warp_tile<qpolicy::test::mma_m16n8k32_e4m3>(
              g::k_steps, g::m_frags, g::n_frags,
              [&](int mf, int ks, int lane, auto& regs) { g::load_a(stage.data(), wm, mf, ks, lane, regs); },
              [&](int nf, int ks, int lane, auto& regs) { g::load_b(stage.data(), wn, nf, ks, lane, regs); },
              [&](int mf, int nf, int lane) { return &sums[static_cast<std::size_t>(lane)][g::acc_index(mf, nf, 0)]; });
          if (blocked)
            for (int lane = 0; lane < 32; ++lane) {
              float row_scales[g::m_frags][2];
              g::chunk_row_scales(p, t, wm, lane, kt, row_scales);
              float (&pl)[g::accumulators] = *reinterpret_cast<float(*)[g::accumulators]>(partial[warp][lane].data());
              float (&al)[g::accumulators] = *reinterpret_cast<float(*)[g::accumulators]>(acc[warp][lane].data());
              g::fold_chunk(pl, row_scales, g::w_scale_of(p, t.expert, n0, kt), al);
            }
        }
      }
      for (int warp = 0; warp < warps; ++warp)
        for (int lane = 0; lane < 32; ++lane) {
          const float (&al)[g::accumulators] = *reinterpret_cast<const float(*)[g::accumulators]>(acc[warp][lane].data());
          g::store_outputs<Scaling>(p, t, n0, warp / g::warps_n, warp % g::warps_n, lane, al);
        }
    }
}

void check_case(const grouped_case& c) {
  INFO(c.name());
  std::vector<std::uint16_t> out(static_cast<std::size_t>(c.rows * c.n), 0xFFFF);  // NaN until written
  const auto p = c.problem(c.a.data(), c.w.data(), c.a_scale.data(), c.w_scale.data(), out.data());
  REQUIRE(g::can_implement(c.n, c.k, c.activation, c.weights).empty());
  const auto tiles = g::make_tiles(c.offsets.data(), c.experts);
  if (c.weights == fp8::weight_scales::block_128x128) emulate_grouped<g::block_scales>(p, tiles);
  else emulate_grouped<g::outer_scales>(p, tiles);
  CHECK(qpolicy::test::check_grouped_bound(c, out) == "");
}

}  // namespace

TEST_CASE("grouped GEMM tiles: one per 128 rows of each expert, none for an expert without rows", "[grouped]") {
  const std::int64_t offsets[] = {0, 0, 1, 129, 129, 385};
  const auto tiles = g::make_tiles(offsets, 5);
  REQUIRE(tiles.size() == 4);
  const g::tile want[] = {{1, 0, 1}, {2, 1, 129}, {4, 129, 257}, {4, 257, 385}};
  for (int i = 0; i < 4; ++i) {
    CHECK(tiles[static_cast<std::size_t>(i)].expert == want[i].expert);
    CHECK(tiles[static_cast<std::size_t>(i)].row_begin == want[i].row_begin);
    CHECK(tiles[static_cast<std::size_t>(i)].row_end == want[i].row_end);
  }
  const std::int64_t bad[] = {0, 5, 3};
  CHECK_THROWS_WITH(g::make_tiles(bad, 2), "expert 1's rows end before they begin");
  const std::int64_t huge[] = {0, std::int64_t{1} << 31};
  CHECK_THROWS_WITH(g::make_tiles(huge, 1), "the grouped GEMM takes at most 2^31 - 1 rows, got 2147483648");
}

TEST_CASE("grouped GEMM refuses what its kernel cannot run, saying why", "[grouped]") {
  using fp8::activation_quant;
  using fp8::weight_scales;
  CHECK(g::can_implement(384, 200, activation_quant::per_tensor, weight_scales::per_tensor) ==
        "the grouped FP8 GEMM needs K to be a positive multiple of 16 (16-byte row copies), got 200");
  CHECK(g::can_implement(385, 256, activation_quant::per_token, weight_scales::per_channel) ==
        "the grouped FP8 GEMM needs N to be positive and even (bf16 pairs), got 385");
  CHECK(g::can_implement(384, 256, activation_quant::per_token, weight_scales::block_128x128) ==
        "128x128 weight blocks need 1x128 activation groups, not per-token activations");
  CHECK(g::can_implement(384, 208, activation_quant::group_128, weight_scales::block_128x128) ==
        "128x128 weight blocks need K (the input features) to be a multiple of 128 (1x128 activation groups), got 208");
  CHECK(g::can_implement(384, 208, activation_quant::per_tensor, weight_scales::per_channel).empty());
}

TEST_CASE("grouped GEMM, emulated on the CPU, meets spec §10's bound for every scaling", "[grouped]") {
  std::mt19937 rng(17);
  for (const auto& c : qpolicy::test::grouped_edge_cases(rng)) check_case(c);
}

TEST_CASE("the bound check catches a wrong output", "[grouped]") {
  std::mt19937 rng(3);
  const auto c = qpolicy::test::make_grouped_case({5, 2}, 16, 128, fp8::activation_quant::per_token,
                                                  fp8::weight_scales::per_channel, rng);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(c.rows * c.n));
  const auto p = c.problem(c.a.data(), c.w.data(), c.a_scale.data(), c.w_scale.data(), out.data());
  emulate_grouped<g::outer_scales>(p, g::make_tiles(c.offsets.data(), c.experts));
  REQUIRE(qpolicy::test::check_grouped_bound(c, out) == "");
  out[17] = fp8::to_bf16(fp8::from_bf16(out[17]) * 1.03f + 1e-3f);
  CHECK(qpolicy::test::check_grouped_bound(c, out) != "");
}
