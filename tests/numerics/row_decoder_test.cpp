// The portable row decoders (kernels/cpu/decode_rows-inl.h) on every CPU target this CPU runs: each
// weight formula's stored codes decode to exactly lp::weight_operand's values (NaN where it gives NaN),
// whole blocks and a last short one, every code and scale byte.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/decode_gemm.hpp"
#include "qpolicy/kernels/cpu/cpu_target.hpp"
#include "qpolicy/numerics/detail/quantize_blocks.hpp"

namespace cpu = qpolicy::cpu;
namespace lp = qpolicy::lp;
using qpolicy::schemes::formula;

namespace {

/// Random stored tensors of weight formula F for an [n, k] matrix: every byte value drawn.
template <formula F>
cpu::quantized_matrix random_matrix(std::int64_t n, std::int64_t k, std::mt19937& rng) {
  constexpr auto& row = qpolicy::schemes::formula_of(F);
  cpu::quantized_matrix m;
  m.rows = n, m.cols = k;
  const bool packed = row.codes == qpolicy::schemes::code_format::e2m1_packed;
  const bool lut = row.codes == qpolicy::schemes::code_format::lut3_tiles;
  m.codes.resize(static_cast<std::size_t>(lut ? n * k * 3 / 8 : packed ? n * k / 2 : n * k));
  for (auto& c : m.codes) c = static_cast<std::uint8_t>(rng());
  if (row.scales != qpolicy::schemes::scale_format::f32) {
    m.block_scales.resize(static_cast<std::size_t>(lut ? (n / 8) * (k / 64) : n * k / row.block()));
    for (auto& s : m.block_scales) s = static_cast<std::uint8_t>(rng());
  }
  if (lut) {
    m.codebook.resize(static_cast<std::size_t>((n / 8) * (k / 64) * 8));
    for (auto& c : m.codebook) c = static_cast<std::uint8_t>(rng());
  }
  return m;
}

template <formula F>
void check_rows(std::int64_t n, std::int64_t k, std::mt19937& rng) {
  const auto m = random_matrix<F>(n, k, rng);
  const cpu::detail::formula_weights<F> w{&m};
  std::vector<float> panel(static_cast<std::size_t>(cpu::detail::panel_cols * cpu::detail::panel_depth));
  for (std::int64_t n0 = 0; n0 < n; n0 += cpu::detail::panel_cols)
    for (std::int64_t k0 = 0; k0 < k; k0 += cpu::detail::panel_depth) {
      const std::int64_t depth = std::min(cpu::detail::panel_depth, k - k0);
      cpu::detail::decode_panel_rows(cpu::detail::code_rows_of(w), n0, k0, depth, panel.data());
      for (std::int64_t j = 0; j < cpu::detail::panel_cols && n0 + j < n; ++j)
        for (std::int64_t t = 0; t < depth; ++t) {
          const float want = lp::weight_operand<F>(m.codes.data(), m.block_scales.empty() ? nullptr : m.block_scales.data(), k, n0 + j,
                                                   k0 + t, m.codebook.empty() ? nullptr : m.codebook.data());
          const float got = panel[static_cast<std::size_t>(t * cpu::detail::panel_cols + j)];
          if (std::isnan(want) ? std::isnan(got) : got == want) continue;
          FAIL_CHECK(qpolicy::schemes::formula_of(F).name << " element (" << n0 + j << ", " << k0 + t << "): " << got << ", expected " << want);
          return;
        }
    }
}

}  // namespace

TEST_CASE("the portable row decoders give each weight formula's exact values on every CPU target", "[numerics][dequantize][property]") {
  const cpu::cpu_target before = cpu::active_cpu_target();
  for (cpu::cpu_target t : cpu::attained_cpu_targets()) {
    INFO("CPU target " << cpu::name_of(t));
    cpu::set_cpu_target(t);
    std::mt19937 rng(7);
    check_rows<formula::mxfp8_torch>(40, 32 * 7, rng);
    check_rows<formula::mxfp4_even>(40, 32 * 7, rng);
    check_rows<formula::int8_per_channel>(40, 201, rng);
    check_rows<formula::nvfp4_weight>(40, 16 * 11, rng);  // a last 16-block that halves a packed vector
    check_rows<formula::lut_b>(48, 64 * 3, rng);
  }
  cpu::set_cpu_target(before);
}

TEST_CASE("CPU targets: the best is attained, an attained one can be forced, another is refused by name", "[numerics][dequantize]") {
  const auto& attained = cpu::attained_cpu_targets();
  REQUIRE(!attained.empty());
  CHECK(attained.front() == cpu::cpu_target::scalar);
  const cpu::cpu_target before = cpu::active_cpu_target();
  cpu::set_cpu_target(cpu::cpu_target::scalar);
  CHECK(cpu::active_cpu_target() == cpu::cpu_target::scalar);
  CHECK(cpu::cpu_target_covers(cpu::cpu_target::scalar));
  CHECK_FALSE(cpu::cpu_target_covers(cpu::cpu_target::avx2));
  const auto foreign = cpu::cpu_target_covers(cpu::cpu_target::neon) ? cpu::cpu_target::avx2 : cpu::cpu_target::neon;
  bool runs_foreign = false;
  for (auto t : attained) runs_foreign |= t == foreign;
  if (!runs_foreign) CHECK_THROWS_WITH(cpu::set_cpu_target(foreign), Catch::StartsWith("CPU target '" + std::string(cpu::name_of(foreign)) +
                                                                                       "' is not one this CPU runs; it runs scalar"));
  cpu::set_cpu_target(before);
  CHECK(cpu::active_cpu_target() == before);
  CHECK(cpu::cpu_target_named("avx3_zen4") == cpu::cpu_target::avx3_zen4);
  CHECK_FALSE(cpu::cpu_target_named("AVX2").has_value());
}
