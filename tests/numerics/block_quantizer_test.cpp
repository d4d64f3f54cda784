// The low-precision CPU references and the CPU fast path against the scheme cases of
// shared/conformance/low_precision_cases.json: codes and scales bit for bit (a NaN code may carry either
// sign), scales also in the 128x4 layout where a case gives it. Each case runs on both implementations.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "qpolicy/kernels/cpu/block_reference.hpp"
#include "../support/low_precision_cases.hpp"
#include "block_quantizer_impls.hpp"
#include "qpolicy/numerics/block_formats.hpp"

namespace lp = qpolicy::lp;
namespace ref = qpolicy::cpu::reference;
using namespace qpolicy::test::low_precision;

namespace {

using mx_quantizer = void (*)(const qpolicy::input_view&, std::uint8_t*, std::uint8_t*);
namespace formulas = qpolicy::formulas;

/// The fast path with the reference's signatures.
template <class Formula>
void fast_blocks(const qpolicy::input_view& x, std::uint8_t* q, std::uint8_t* scales) {
  qpolicy::cpu::quantize<Formula>(x, {q, scales, nullptr}, {}, {3});
}
void fast_int8(const qpolicy::input_view& x, std::int8_t* q, float* scales) {
  qpolicy::cpu::quantize<formulas::int8_per_channel>(x, {reinterpret_cast<std::uint8_t*>(q), scales, nullptr}, {}, {3});
}
ref::nvfp4_global fast_nvfp4_weight(const qpolicy::input_view& x, std::uint8_t* q, std::uint8_t* sf) {
  ref::nvfp4_global g{0.0f, -1.0f};  // the fast path stores weight_scale_2 only
  qpolicy::cpu::quantize<formulas::nvfp4_weight>(x, {q, sf, &g.weight_scale_2}, {}, {3});
  return g;
}
void fast_nvfp4_per_token(const qpolicy::input_view& x, std::uint8_t* q, std::uint8_t* sf, float* st) {
  qpolicy::cpu::quantize<formulas::nvfp4_per_token>(x, {q, sf, st}, {}, {3});
}
ref::nvfp4_global reference_nvfp4_weight(const qpolicy::input_view& x, std::uint8_t* q, std::uint8_t* sf) {
  return ref::nvfp4_weight(x, q, sf);
}

/// One implementation of every quantizer: the reference, or the fast path.
struct implementation {
  const char* name;
  mx_quantizer mxfp8_torch, mxfp8_flashinfer, mxfp4_even, mxfp4_rceil;
  void (*int8_per_channel)(const qpolicy::input_view&, std::int8_t*, float*);
  ref::nvfp4_global (*nvfp4_weight)(const qpolicy::input_view&, std::uint8_t*, std::uint8_t*);
  void (*nvfp4_per_token)(const qpolicy::input_view&, std::uint8_t*, std::uint8_t*, float*);
};
const implementation implementations[] = {
    {"CPU reference", ref::mxfp8_torch, ref::mxfp8_flashinfer, ref::mxfp4_even, ref::mxfp4_flashinfer, ref::int8_per_channel,
     reference_nvfp4_weight, ref::nvfp4_per_token},
    {"CPU fast path", fast_blocks<formulas::mxfp8_torch>, fast_blocks<formulas::mxfp8_flashinfer>,
     fast_blocks<formulas::mxfp4_even>, fast_blocks<formulas::mxfp4_rceil>, fast_int8, fast_nvfp4_weight, fast_nvfp4_per_token},
};

/// Quantizes `x` with `quantize` and compares codes and scales with the expected hex.
void check_mx(mx_quantizer quantize, const qpolicy::input_view& x, const bj::value& want_q, const bj::value& want_scales) {
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
  const auto& impl = implementations[GENERATE(0, 1)];
  INFO(impl.name);
  for_each_case("mxfp8_quant", [&](const bj::object& c, const input_tensor& x, const bj::object& out) {
    check_mx(impl.mxfp8_torch, x.view(), out.at("q_hex"), out.at("scale_e8m0_hex"));
    if (out.contains("scale_swizzled_128x4_hex")) {
      std::vector<std::uint8_t> q(static_cast<std::size_t>(x.rows * x.cols)), s(static_cast<std::size_t>(x.rows * (x.cols / 32)));
      impl.mxfp8_torch(x.view(), q.data(), s.data());
      check_swizzled(s, x.rows, x.cols / 32, out.at("scale_swizzled_128x4_hex"));
    }
    // Blackwell's FlashInfer path: the same bytes on ordinary data, its own where a case lists them.
    const auto& fi = c.at("flashinfer_variant").as_object();
    if (fi.at("same_as_torch_path").as_bool()) check_mx(impl.mxfp8_flashinfer, x.view(), out.at("q_hex"), out.at("scale_e8m0_hex"));
    else check_mx(impl.mxfp8_flashinfer, x.view(), fi.at("q_hex"), fi.at("scale_e8m0_hex"));
  });
}

TEST_CASE("MXFP8 MoE: each expert's w13 and w2 blocked along their last dimension (§3.6)", "[numerics][low_precision][mxfp8]") {
  const auto& impl = implementations[GENERATE(0, 1)];
  INFO(impl.name);
  for (const auto* c : cases_of_kind("mxfp8_moe")) {
    INFO(c->at("id").as_string());
    const auto& out = c->at("output").as_object();
    // Blocks never cross rows, so [E, R, C] quantizes as [E * R, C].
    check_mx(impl.mxfp8_torch, input_of(c->at("input").at("w13")).view(), out.at("w13_q_hex"), out.at("w13_scale_e8m0_hex"));
    check_mx(impl.mxfp8_torch, input_of(c->at("input").at("w2")).view(), out.at("w2_q_hex"), out.at("w2_scale_e8m0_hex"));
  }
}

namespace {


struct mx4_result {
  std::vector<std::uint8_t> q, scales;
};
mx4_result run_mx4(mx_quantizer quantize, const qpolicy::input_view& x) {
  mx4_result r{std::vector<std::uint8_t>(static_cast<std::size_t>(x.size() / 2)),
               std::vector<std::uint8_t>(static_cast<std::size_t>(x.rows * (x.cols / 32)))};
  quantize(x, r.q.data(), r.scales.data());
  return r;
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
    if (x.type == qpolicy::element::bf16) {
      REQUIRE((qpolicy::fp8::to_bf16(v) & 0x7FFFu) == (want[static_cast<std::size_t>(i)] & 0x7FFFu));  // zero sign free
    } else if (v == 0.0f || (std::fabs(v) >= 0x1p-14f && std::fabs(v) <= 65504.0f)) {
      REQUIRE(std::fabs(qpolicy::fp8::from_fp16(want[static_cast<std::size_t>(i)])) == std::fabs(v));
    }
  }
}

}  // namespace

TEST_CASE("MXFP4 weights: EVEN scales and packed e2m1 codes (§4.2) on every mxfp4_quant case", "[numerics][low_precision][mxfp4]") {
  const auto& impl = implementations[GENERATE(0, 1)];
  INFO(impl.name);
  for_each_case("mxfp4_quant", [&](const bj::object&, const input_tensor& x, const bj::object& out) {
    const auto r = run_mx4(impl.mxfp4_even, x.view());
    check_packed(r.q, out.at("q_packed_hex"));
    CHECK(r.scales == bytes(out.at("scale_e8m0_hex")));
    if (out.contains("dequant_hex")) check_dequant(r, x, out.at("dequant_hex"));
    if (out.contains("scale_swizzled_128x4_hex")) check_swizzled(r.scales, x.rows, x.cols / 32, out.at("scale_swizzled_128x4_hex"));
  });
}

TEST_CASE("MXFP4 activations: Blackwell's RCEIL quantizer and the MoE emulation's quantize-dequantize (§4.3)",
          "[numerics][low_precision][mxfp4]") {
  const auto& impl = implementations[GENERATE(0, 1)];
  INFO(impl.name);
  for_each_case("mxfp4_act_flashinfer", [&](const bj::object&, const input_tensor& x, const bj::object& out) {
    const auto r = run_mx4(impl.mxfp4_rceil, x.view());
    check_packed(r.q, out.at("q_packed_hex"));
    CHECK(r.scales == bytes(out.at("scale_e8m0_hex")));
    check_swizzled(r.scales, x.rows, x.cols / 32, out.at("scale_swizzled_128x4_hex"));
  });
  for_each_case("mxfp4_act_qdq", [&](const bj::object&, const input_tensor& x, const bj::object& out) {
    const auto r = run_mx4(impl.mxfp4_even, x.view());
    check_packed(r.q, out.at("q_packed_hex"));
    CHECK(r.scales == bytes(out.at("scale_e8m0_hex")));
    check_dequant(r, x, out.at("qdq_bf16_hex"));
  });
}

TEST_CASE("MXFP4 MoE: experts zero-padded to 32 (gate rows at 0, up rows at Ip), then EVEN (§4.1)", "[numerics][low_precision][mxfp4]") {
  const auto& impl = implementations[GENERATE(0, 1)];
  INFO(impl.name);
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
    const auto r13 = run_mx4(impl.mxfp4_even, {p13.data(), qpolicy::element::f32, experts * 2 * ip, hp});
    check_packed(r13.q, out.at("w13_q_packed_hex_padded"));
    CHECK(r13.scales == bytes(out.at("w13_scale_e8m0_hex")));
    const auto r2 = run_mx4(impl.mxfp4_even, {p2.data(), qpolicy::element::f32, experts * hp, ip});
    check_packed(r2.q, out.at("w2_q_packed_hex_padded"));
    CHECK(r2.scales == bytes(out.at("w2_scale_e8m0_hex")));
  }
}

TEST_CASE("INT8 per-channel weights in the model dtype, with its double rounding (§5.2)", "[numerics][low_precision][int8]") {
  const auto& impl = implementations[GENERATE(0, 1)];
  INFO(impl.name);
  for (const auto* c : cases_of_kind("int8_moe")) {
    INFO(c->at("id").as_string());
    const auto& out = c->at("output").as_object();
    for (const char* which : {"w13", "w2"}) {
      INFO(which);
      const auto w = input_of(c->at("input").at(which));  // [E, R, C] as [E * R, C]: one scale per row
      std::vector<std::int8_t> q(static_cast<std::size_t>(w.rows * w.cols));
      std::vector<float> s(static_cast<std::size_t>(w.rows));
      impl.int8_per_channel(w.view(), q.data(), s.data());
      const auto want_q = bytes(out.at(std::string(which) + "_q_hex"));
      REQUIRE(want_q.size() == q.size());
      for (std::size_t i = 0; i < q.size(); ++i) {
        INFO("code " << i);
        REQUIRE(static_cast<std::uint8_t>(q[i]) == want_q[i]);
      }
      const auto& want_s = out.at(std::string(which) + "_scale_f32_hex").as_array();
      REQUIRE(want_s.size() == s.size());
      for (std::size_t i = 0; i < s.size(); ++i) {
        INFO("scale " << i);
        CHECK(qpolicy::fp8::bits_of(s[i]) == hex32(want_s[i]));
      }
    }
  }
}

TEST_CASE("NVFP4 expert weights: global scale, e4m3 16-block scales, packed codes (§6.2)", "[numerics][low_precision][nvfp4]") {
  const auto& impl = implementations[GENERATE(0, 1)];
  INFO(impl.name);
  for (const auto* c : cases_of_kind("nvfp4_moe_weight")) {
    INFO(c->at("id").as_string());
    const auto& out = c->at("output").as_object();
    const auto x = input_of(c->at("input"));
    const std::int64_t experts = c->at("params").at("experts").as_int64(), rows = c->at("params").at("rows").as_int64();
    const auto want_q = bytes(out.at("q_packed_hex")), want_sf = bytes(out.at("sf_e4m3_hex"));
    const auto& want_ws2 = out.at("weight_scale_2_f32_hex").as_array();
    const auto& want_gs = out.at("global_scale_f32_hex").as_array();
    const std::size_t q_per_expert = static_cast<std::size_t>(rows * x.cols / 2), sf_per_expert = static_cast<std::size_t>(rows * x.cols / 16);
    for (std::int64_t e = 0; e < experts; ++e) {
      INFO("expert " << e);
      std::vector<std::uint8_t> q(q_per_expert), sf(sf_per_expert);
      const auto g = impl.nvfp4_weight(x.view().rows_from(e * rows, rows), q.data(), sf.data());
      CHECK(qpolicy::fp8::bits_of(g.weight_scale_2) == hex32(want_ws2[static_cast<std::size_t>(e)]));
      if (g.global_scale >= 0) CHECK(qpolicy::fp8::bits_of(g.global_scale) == hex32(want_gs[static_cast<std::size_t>(e)]));
      // rcp.approx is modelled as exact; the vectors' exact-reciprocal values are the first alternative.
      CHECK(sf == std::vector<std::uint8_t>(want_sf.begin() + static_cast<std::ptrdiff_t>(e * sf_per_expert),
                                            want_sf.begin() + static_cast<std::ptrdiff_t>((e + 1) * sf_per_expert)));
      check_packed(q, std::vector<std::uint8_t>(want_q.begin() + static_cast<std::ptrdiff_t>(e * q_per_expert),
                                                want_q.begin() + static_cast<std::ptrdiff_t>((e + 1) * q_per_expert)));
    }
  }
}

TEST_CASE("NVFP4 per-token activations, FlashInfer's fast-math kernel (§6.3)", "[numerics][low_precision][nvfp4]") {
  const auto& impl = implementations[GENERATE(0, 1)];
  INFO(impl.name);
  for_each_case("nvfp4_act_per_token", [&](const bj::object& c, const input_tensor& x, const bj::object& out) {
    std::vector<std::uint8_t> q(static_cast<std::size_t>(x.rows * x.cols / 2)), sf(static_cast<std::size_t>(x.rows * x.cols / 16));
    std::vector<float> st(static_cast<std::size_t>(x.rows));
    impl.nvfp4_per_token(x.view(), q.data(), sf.data(), st.data());
    CHECK(sf == bytes(out.at("sf_e4m3_hex")));
    const auto& want_st = out.at("per_token_scale_f32_hex").as_array();
    for (std::size_t r = 0; r < st.size(); ++r) CHECK(qpolicy::fp8::bits_of(st[r]) == hex32(want_st[r]));
    // Codes the vectors call unspecified (0 * inf in a block whose scale rounds to zero) are not compared.
    auto want = bytes(out.at("q_packed_hex"));
    for (const auto& u : c.at("codes_with_unspecified_value").as_array()) {
      const auto row = u.at("row").as_int64(), col = u.at("col").as_int64();
      auto& byte = q[static_cast<std::size_t>((row * x.cols + col) / 2)];
      byte = col % 2 ? static_cast<std::uint8_t>(byte & 0x0Fu) : static_cast<std::uint8_t>(byte & 0xF0u);
      auto& wbyte = want[static_cast<std::size_t>((row * x.cols + col) / 2)];
      wbyte = col % 2 ? static_cast<std::uint8_t>(wbyte & 0x0Fu) : static_cast<std::uint8_t>(wbyte & 0xF0u);
    }
    check_packed(q, want);
  });
}

namespace {

/// Dequantized operands (float64, exact) of the §9 GEMM references.
std::vector<double> dequant_mx8(const qpolicy::input_view& x, mx_quantizer quantize, bool marlin_zero_scale) {
  std::vector<std::uint8_t> q(static_cast<std::size_t>(x.size())), s(static_cast<std::size_t>(x.rows * (x.cols / 32)));
  quantize(x, q.data(), s.data());
  std::vector<double> out(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) {
    const auto b = s[i / 32];  // rows are whole blocks
    out[i] = marlin_zero_scale && b == 0 ? 0.0 : double(qpolicy::fp8::decode(q[i])) * lp::e8m0_value(b);
  }
  return out;
}
std::vector<double> dequant_mx4(const qpolicy::input_view& x, mx_quantizer quantize, bool round_to_d) {
  const auto r = run_mx4(quantize, x);
  std::vector<double> out(static_cast<std::size_t>(x.size()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto byte = r.q[i / 2];
    const float v = lp::e2m1_value(i % 2 ? lp::e2m1_high(byte) : lp::e2m1_low(byte)) * lp::e8m0_value(r.scales[i / 32]);
    out[i] = round_to_d ? lp::round_to(x.type, v) : v;
  }
  return out;
}
std::vector<double> dequant_nvfp4(const qpolicy::input_view& x, bool per_token) {
  std::vector<std::uint8_t> q(static_cast<std::size_t>(x.size() / 2)), sf(static_cast<std::size_t>(x.size() / 16));
  std::vector<float> st(static_cast<std::size_t>(x.rows));
  float scale2 = 0;
  if (per_token) ref::nvfp4_per_token(x, q.data(), sf.data(), st.data());
  else scale2 = ref::nvfp4_weight(x, q.data(), sf.data()).weight_scale_2;
  std::vector<double> out(static_cast<std::size_t>(x.size()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto byte = q[i / 2];
    const double outer = per_token ? st[i / static_cast<std::size_t>(x.cols)] : scale2;
    out[i] = double(lp::e2m1_value(i % 2 ? lp::e2m1_high(byte) : lp::e2m1_low(byte))) * qpolicy::fp8::decode(sf[i / 16]) * outer;
  }
  return out;
}
std::vector<double> values_of(const qpolicy::input_view& x) {
  std::vector<double> out(static_cast<std::size_t>(x.size()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = x.at(static_cast<std::int64_t>(i));
  return out;
}
std::vector<double> dequant_int8(const qpolicy::input_view& w) {
  std::vector<std::int8_t> q(static_cast<std::size_t>(w.size()));
  std::vector<float> s(static_cast<std::size_t>(w.rows));
  ref::int8_per_channel(w, q.data(), s.data());
  std::vector<double> out(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) out[i] = double(q[i]) * s[i / static_cast<std::size_t>(w.cols)];
  return out;
}

}  // namespace

TEST_CASE("the GEMM references of every path from these quantizers meet the vectors within §9's bound",
          "[numerics][low_precision][gemm]") {
  const auto& c = low_precision_case("gemm/3x4x64_all_schemes");
  const auto a = input_of(c.at("input").at("A")), w = input_of(c.at("input").at("W"));
  const std::int64_t m = a.rows, n = w.rows, k = a.cols;
  const struct {
    const char* path;
    std::vector<double> a, w;
  } paths[] = {
      {"mxfp8_w8a8_blackwell", dequant_mx8(a.view(), ref::mxfp8_flashinfer, false), dequant_mx8(w.view(), ref::mxfp8_torch, false)},
      {"mxfp8_w8a16_marlin_hopper", values_of(a.view()), dequant_mx8(w.view(), ref::mxfp8_torch, true)},
      {"mxfp4_w4a16_marlin_hopper", values_of(a.view()), dequant_mx4(w.view(), ref::mxfp4_even, false)},
      {"mxfp4_w4a4_flashinfer_blackwell_linear", dequant_mx4(a.view(), ref::mxfp4_flashinfer, false),
       dequant_mx4(w.view(), ref::mxfp4_even, false)},
      {"mxfp4_moe_emulation_qdq_even", dequant_mx4(a.view(), ref::mxfp4_even, true), dequant_mx4(w.view(), ref::mxfp4_even, false)},
      {"int8_w8a16_triton", values_of(a.view()), dequant_int8(w.view())},
      {"nvfp4_per_token_trtllm_blackwell", dequant_nvfp4(a.view(), true), dequant_nvfp4(w.view(), false)},
  };
  for (const auto& p : paths) {
    INFO(p.path);
    const auto& want = c.at("output").at(p.path).as_array();
    const auto& terms = c.at("abs_term_sum").at(p.path).as_array();
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double ref_value = 0;
        for (std::int64_t t = 0; t < k; ++t) ref_value += p.a[static_cast<std::size_t>(i * k + t)] * p.w[static_cast<std::size_t>(j * k + t)];
        const auto at = static_cast<std::size_t>(i * n + j);
        const double expected = std::stod(std::string(want[at].as_string())), t_sum = std::stod(std::string(terms[at].as_string()));
        // §9: |out - ref| <= ulp_out(ref) + (K + 4) 2^-24 T, with a bf16 output's ulp (2^-7 relative).
        INFO("output (" << i << ", " << j << "): " << ref_value << " vs " << expected);
        CHECK(std::fabs(ref_value - expected) <= std::ldexp(std::fabs(expected), -7) + double(k + 4) * std::ldexp(t_sum, -24));
      }
  }
}
