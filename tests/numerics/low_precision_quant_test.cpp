// The low-precision CPU references against the scheme cases of shared/conformance/low_precision_cases.json:
// codes and scales bit for bit (a NaN code may carry either sign), scales also in the 128x4 layout
// where a case gives it.
#include <catch2/catch.hpp>

#include <cmath>
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
  for_each_case("mxfp8_quant", [](const bj::object& c, const input_tensor& x, const bj::object& out) {
    check_mx(ref::mxfp8_torch, x.view(), out.at("q_hex"), out.at("scale_e8m0_hex"));
    if (out.contains("scale_swizzled_128x4_hex")) {
      std::vector<std::uint8_t> q(static_cast<std::size_t>(x.rows * x.cols)), s(static_cast<std::size_t>(x.rows * (x.cols / 32)));
      ref::mxfp8_torch(x.view(), q.data(), s.data());
      check_swizzled(s, x.rows, x.cols / 32, out.at("scale_swizzled_128x4_hex"));
    }
    // Blackwell's FlashInfer path: the same bytes on ordinary data, its own where a case lists them.
    const auto& fi = c.at("flashinfer_variant").as_object();
    if (fi.at("same_as_torch_path").as_bool()) check_mx(ref::mxfp8_flashinfer, x.view(), out.at("q_hex"), out.at("scale_e8m0_hex"));
    else check_mx(ref::mxfp8_flashinfer, x.view(), fi.at("q_hex"), fi.at("scale_e8m0_hex"));
  });
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

namespace {

/// e2m1 nibbles equal, a zero of either sign matching another zero (§11: 0x0 and 0x8 are both accepted).
bool same_e2m1_code(std::uint8_t a, std::uint8_t b) { return a == b || ((a & 7u) == 0 && (b & 7u) == 0); }

struct mx4_result {
  std::vector<std::uint8_t> q, scales;
};
mx4_result run_mx4(mx_quantizer quantize, const qpolicy::fp8::input_view& x) {
  mx4_result r{std::vector<std::uint8_t>(static_cast<std::size_t>(x.size() / 2)),
               std::vector<std::uint8_t>(static_cast<std::size_t>(x.rows * (x.cols / 32)))};
  quantize(x, r.q.data(), r.scales.data());
  return r;
}

void check_packed(const std::vector<std::uint8_t>& got, const bj::value& want_hex) {
  const auto want = bytes(want_hex);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("byte " << i << ": got " << int(got[i]) << ", want " << int(want[i]));
    REQUIRE(same_e2m1_code(lp::e2m1_low(got[i]), lp::e2m1_low(want[i])));
    REQUIRE(same_e2m1_code(lp::e2m1_high(got[i]), lp::e2m1_high(want[i])));
  }
}

/// The dequantized values F4(c) * E8(b), rounded to the model dtype as vLLM's torch reference does:
/// bf16 always; fp16 where the value is a normal fp16 or zero (vLLM first converts E8(b) to fp16,
/// which loses tiny and huge scales, §4.5).
void check_dequant(const mx4_result& r, const input_tensor& x, const bj::value& want_hex) {
  const auto want = halves(want_hex);
  REQUIRE(static_cast<std::int64_t>(want.size()) == x.rows * x.cols);
  for (std::int64_t i = 0; i < x.rows * x.cols; ++i) {
    const auto byte = r.q[static_cast<std::size_t>(i / 2)];
    const float v = lp::e2m1_value(i % 2 ? lp::e2m1_high(byte) : lp::e2m1_low(byte)) *
                    lp::e8m0_value(r.scales[static_cast<std::size_t>((i / x.cols) * (x.cols / 32) + (i % x.cols) / 32)]);
    INFO("element " << i);
    if (x.type == qpolicy::fp8::element::bf16) {
      REQUIRE((qpolicy::fp8::to_bf16(v) & 0x7FFFu) == (want[static_cast<std::size_t>(i)] & 0x7FFFu));  // zero sign free
    } else if (v == 0.0f || (std::fabs(v) >= 0x1p-14f && std::fabs(v) <= 65504.0f)) {
      REQUIRE(std::fabs(qpolicy::fp8::from_fp16(want[static_cast<std::size_t>(i)])) == std::fabs(v));
    }
  }
}

}  // namespace

TEST_CASE("MXFP4 weights: EVEN scales and packed e2m1 codes (§4.2) on every mxfp4_quant case", "[numerics][low_precision][mxfp4]") {
  for_each_case("mxfp4_quant", [](const bj::object&, const input_tensor& x, const bj::object& out) {
    const auto r = run_mx4(ref::mxfp4_even, x.view());
    check_packed(r.q, out.at("q_packed_hex"));
    CHECK(r.scales == bytes(out.at("scale_e8m0_hex")));
    if (out.contains("dequant_hex")) check_dequant(r, x, out.at("dequant_hex"));
    if (out.contains("scale_swizzled_128x4_hex")) check_swizzled(r.scales, x.rows, x.cols / 32, out.at("scale_swizzled_128x4_hex"));
  });
}

TEST_CASE("MXFP4 activations: Blackwell's RCEIL quantizer and the MoE emulation's quantize-dequantize (§4.3)",
          "[numerics][low_precision][mxfp4]") {
  for_each_case("mxfp4_act_flashinfer", [](const bj::object&, const input_tensor& x, const bj::object& out) {
    const auto r = run_mx4(ref::mxfp4_flashinfer, x.view());
    check_packed(r.q, out.at("q_packed_hex"));
    CHECK(r.scales == bytes(out.at("scale_e8m0_hex")));
    check_swizzled(r.scales, x.rows, x.cols / 32, out.at("scale_swizzled_128x4_hex"));
  });
  for_each_case("mxfp4_act_qdq", [](const bj::object&, const input_tensor& x, const bj::object& out) {
    const auto r = run_mx4(ref::mxfp4_even, x.view());
    check_packed(r.q, out.at("q_packed_hex"));
    CHECK(r.scales == bytes(out.at("scale_e8m0_hex")));
    check_dequant(r, x, out.at("qdq_bf16_hex"));
  });
}

TEST_CASE("MXFP4 MoE: experts zero-padded to 32 (gate rows at 0, up rows at Ip), then EVEN (§4.1)", "[numerics][low_precision][mxfp4]") {
  for (const auto* c : cases_of_kind("mxfp4_moe")) {
    INFO(c->at("id").as_string());
    const auto& p = c->at("params").as_object();
    const std::int64_t experts = p.at("experts").as_int64();
    const std::int64_t inter = p.at("unpadded").at("intermediate").as_int64(), hidden = p.at("unpadded").at("hidden").as_int64();
    const std::int64_t ip = p.at("padded").at("intermediate").as_int64(), hp = p.at("padded").at("hidden").as_int64();
    const auto w13 = input_of(c->at("input").at("w13_unpadded")), w2 = input_of(c->at("input").at("w2_unpadded"));
    // The padded experts in float32 (exact), as vLLM's _zero_padding leaves them.
    std::vector<float> p13(static_cast<std::size_t>(experts * 2 * ip * hp), 0.0f), p2(static_cast<std::size_t>(experts * hp * ip), 0.0f);
    const auto v13 = w13.view(), v2 = w2.view();
    for (std::int64_t e = 0; e < experts; ++e) {
      for (std::int64_t r = 0; r < 2 * inter; ++r) {
        const std::int64_t to = e * 2 * ip + (r < inter ? r : ip + r - inter);
        for (std::int64_t k = 0; k < hidden; ++k) p13[static_cast<std::size_t>(to * hp + k)] = v13.at(e * 2 * inter + r, k);
      }
      for (std::int64_t r = 0; r < hidden; ++r)
        for (std::int64_t k = 0; k < inter; ++k) p2[static_cast<std::size_t>((e * hp + r) * ip + k)] = v2.at(e * hidden + r, k);
    }
    const auto& out = c->at("output").as_object();
    const auto r13 = run_mx4(ref::mxfp4_even, {p13.data(), qpolicy::fp8::element::f32, experts * 2 * ip, hp});
    check_packed(r13.q, out.at("w13_q_packed_hex_padded"));
    CHECK(r13.scales == bytes(out.at("w13_scale_e8m0_hex")));
    const auto r2 = run_mx4(ref::mxfp4_even, {p2.data(), qpolicy::fp8::element::f32, experts * hp, ip});
    check_packed(r2.q, out.at("w2_q_packed_hex_padded"));
    CHECK(r2.scales == bytes(out.at("w2_scale_e8m0_hex")));
  }
}
