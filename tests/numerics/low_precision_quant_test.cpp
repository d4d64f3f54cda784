// The low-precision CPU references against the scheme cases of shared/conformance/low_precision_cases.json:
// codes and scales bit for bit (a NaN code may carry either sign), scales also in the 128x4 layout
// where a case gives it.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "kernels/cpu/low_precision_reference.hpp"
#include "low_precision_cases.hpp"
#include "qpolicy/numerics/low_precision.hpp"

namespace lp = qpolicy::lp;
namespace ref = qpolicy::cpu::reference;
using namespace qpolicy::test::low_precision;

namespace {

using mx_quantizer = void (*)(const qpolicy::fp8::input_view&, std::uint8_t*, std::uint8_t*);

/// Quantizes `x` with `quantize` and compares codes and scales with the expected hex.
void check_mx(mx_quantizer quantize, const qpolicy::fp8::input_view& x, const bj::value& want_q, const bj::value& want_scales) {
  std::vector<std::uint8_t> q(static_cast<std::size_t>(x.size())), s(static_cast<std::size_t>(x.rows * (x.cols / 32)));
  quantize(x, q.data(), s.data());
  const auto wq = bytes(want_q), ws = bytes(want_scales);
  REQUIRE(q.size() == wq.size());
  for (std::size_t i = 0; i < q.size(); ++i) {
    INFO("code " << i << " (row " << i / static_cast<std::size_t>(x.cols) << ")");
    REQUIRE(same_e4m3_code(q[i], wq[i]));
  }
  CHECK(s == ws);
}

/// The scales in the 128x4 layout, compared on the slots that hold a scale (padding is free, §7).
void check_swizzled(const std::vector<std::uint8_t>& scales, std::int64_t rows, std::int64_t per_row, const bj::value& want) {
  const auto w = bytes(want);
  REQUIRE(static_cast<std::int64_t>(w.size()) == lp::swizzled_rows(rows) * lp::swizzled_cols(per_row));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < per_row; ++k) {
      INFO("scale (" << r << ", " << k << ")");
      REQUIRE(w[static_cast<std::size_t>(lp::swizzled_offset(r, k, per_row))] == scales[static_cast<std::size_t>(r * per_row + k)]);
    }
}

}  // namespace

TEST_CASE("MXFP8: the torch path (§3.2) and the FlashInfer path (§3.3) on every mxfp8_quant case", "[numerics][low_precision][mxfp8]") {
  for (const auto* c : cases_of_kind("mxfp8_quant")) {
    INFO(c->at("id").as_string());
    const auto x = input_of(c->at("input"));
    const auto& out = c->at("output").as_object();
    check_mx(ref::mxfp8_torch, x.view(), out.at("q_hex"), out.at("scale_e8m0_hex"));
    if (out.contains("scale_swizzled_128x4_hex")) {
      std::vector<std::uint8_t> q(static_cast<std::size_t>(x.rows * x.cols)), s(static_cast<std::size_t>(x.rows * (x.cols / 32)));
      ref::mxfp8_torch(x.view(), q.data(), s.data());
      check_swizzled(s, x.rows, x.cols / 32, out.at("scale_swizzled_128x4_hex"));
    }
    // Blackwell's FlashInfer path: the same bytes on ordinary data, its own where a case lists them.
    const auto& fi = c->at("flashinfer_variant").as_object();
    if (fi.at("same_as_torch_path").as_bool()) check_mx(ref::mxfp8_flashinfer, x.view(), out.at("q_hex"), out.at("scale_e8m0_hex"));
    else check_mx(ref::mxfp8_flashinfer, x.view(), fi.at("q_hex"), fi.at("scale_e8m0_hex"));
  }
}

TEST_CASE("MXFP8 MoE: each expert's w13 and w2 blocked along their last dimension (§3.6)", "[numerics][low_precision][mxfp8]") {
  for (const auto* c : cases_of_kind("mxfp8_moe")) {
    INFO(c->at("id").as_string());
    const auto& out = c->at("output").as_object();
    // Blocks never cross rows, so [E, R, C] quantizes as [E * R, C].
    check_mx(ref::mxfp8_torch, input_of(c->at("input").at("w13")).view(), out.at("w13_q_hex"), out.at("w13_scale_e8m0_hex"));
    check_mx(ref::mxfp8_torch, input_of(c->at("input").at("w2")).view(), out.at("w2_q_hex"), out.at("w2_scale_e8m0_hex"));
  }
}
