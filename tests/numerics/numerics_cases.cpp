// Every case of shared/conformance/numerics_cases.json on the CPU reference: codes and scales bit for
// bit (a NaN code may carry either sign, spec §2), GEMM references within spec §10's bound, and the
// e4m3fn encoding against ml_dtypes as an outside witness.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "../support/fp8_cases.hpp"
#include "../support/process.hpp"
#include "../support/temp_dir.hpp"
#include "qpolicy/kernels/cpu/gemm_reference.hpp"
#include "qpolicy/kernels/cpu/reference.hpp"

namespace fp8 = qpolicy::fp8;
namespace ref = qpolicy::cpu::reference;
using namespace qpolicy::test::fp8_cases;

TEST_CASE("e4m3fn encoding and decoding tables", "[numerics]") {
  for (const auto* c : of_kind("encode"))
    for (const auto& e : c->at("entries").as_array()) {
      const float x = fp8::float_of(hex(e.at("x_f32_hex").as_string()));
      INFO("x = " << e.at("x").as_string());
      const auto sat = e.at("satfinite").to_number<int>(), torch = e.at("torch").to_number<int>();
      const auto torch_old = e.at("torch_before_2_12").to_number<int>();
      CHECK((fp8::sat(x) == sat || (is_nan_code(fp8::sat(x)) && is_nan_code(static_cast<std::uint8_t>(sat)))));
      CHECK((fp8::tcvt(x) == torch || (is_nan_code(fp8::tcvt(x)) && is_nan_code(static_cast<std::uint8_t>(torch)))));
      CHECK((fp8::tcvt_before_2_12(x) == torch_old ||
             (is_nan_code(fp8::tcvt_before_2_12(x)) && is_nan_code(static_cast<std::uint8_t>(torch_old)))));
    }
  for (const auto* c : of_kind("decode")) {
    const auto& values = c->at("values").as_array();
    REQUIRE(values.size() == 256);
    for (int q = 0; q < 256; ++q) {
      const std::string want(values[static_cast<std::size_t>(q)].as_string());
      const float got = fp8::decode(static_cast<std::uint8_t>(q));
      INFO("code " << q << " want " << want);
      if (want == "nan" || want == "NaN") CHECK(std::isnan(got));
      else CHECK(got == std::stof(want));
    }
  }
}

TEST_CASE("per-tensor weights", "[numerics]") {
  for (const auto* c : of_kind("weight_per_tensor")) {
    INFO(c->at("id").as_string());
    const auto s = shape(c->at("input").at("shape"));
    const auto x = bf16(c->at("input"));
    std::vector<std::uint8_t> q(x.size());
    float scale = 0;
    ref::weight_per_tensor(view(x, s[0], s[1]), q.data(), &scale);
    check_codes(q, codes(c->at("output").at("q_hex")));
    check_scales(&scale, words(c->at("output").at("weight_scale_f32_hex")));
  }
}

TEST_CASE("dynamic activations: per-tensor and per-token", "[numerics]") {
  for (const auto* c : of_kind("dynamic_per_tensor")) {
    INFO(c->at("id").as_string());
    const auto s = shape(c->at("input").at("shape"));
    const auto x = bf16(c->at("input"));
    std::vector<std::uint8_t> q(x.size());
    float scale = 0;
    ref::dynamic_per_tensor(view(x, s[0], s[1]), q.data(), &scale);
    check_codes(q, codes(c->at("output").at("q_hex")));
    check_scales(&scale, words(c->at("output").at("scale_f32_hex")));
  }
  for (const auto* c : of_kind("dynamic_per_token")) {
    INFO(c->at("id").as_string());
    const auto s = shape(c->at("input").at("shape"));
    const auto x = bf16(c->at("input"));
    std::vector<std::uint8_t> q(x.size());
    std::vector<float> scales(static_cast<std::size_t>(s[0]));
    ref::dynamic_per_token(view(x, s[0], s[1]), q.data(), scales.data());
    check_codes(q, codes(c->at("output").at("q_hex")));
    check_scales(scales.data(), words(c->at("output").at("scale_f32_hex")));
  }
}

TEST_CASE("per-channel weights", "[numerics]") {
  for (const auto* c : of_kind("weight_per_channel")) {
    INFO(c->at("id").as_string());
    const auto s = shape(c->at("input").at("shape"));
    const auto x = bf16(c->at("input"));
    std::vector<std::uint8_t> q(x.size());
    std::vector<float> scales(static_cast<std::size_t>(s[0]));
    ref::weight_per_channel(view(x, s[0], s[1]), q.data(), scales.data());
    check_codes(q, codes(c->at("output").at("q_hex")));
    check_scales(scales.data(), words(c->at("output").at("weight_scale_f32_hex")));
  }
}

TEST_CASE("1x128 activation groups in every scale layout", "[numerics]") {
  for (const auto* c : of_kind("per_token_group")) {
    INFO(c->at("id").as_string());
    const auto s = shape(c->at("input").at("shape"));
    const auto x = bf16(c->at("input"));
    const auto& params = c->at("params");
    fp8::group_options o;
    o.group_size = params.at("group_size").to_number<std::int64_t>();
    o.ue8m0 = params.at("use_ue8m0").as_bool();
    const std::int64_t groups = s[1] / o.group_size;
    std::vector<std::uint8_t> q(x.size());
    std::vector<float> row_major(static_cast<std::size_t>(s[0] * groups));
    ref::per_token_group(view(x, s[0], s[1]), o, q.data(), row_major.data());
    check_codes(q, codes(c->at("output").at("q_hex")));
    check_scales(row_major.data(), words(c->at("output").at("scale_row_major_f32_hex")));
    // Column-major: the same scales transposed.
    o.layout = fp8::scale_layout::column_major;
    std::vector<float> col(static_cast<std::size_t>(s[0] * groups));
    ref::per_token_group(view(x, s[0], s[1]), o, q.data(), col.data());
    for (std::int64_t m = 0; m < s[0]; ++m)
      for (std::int64_t g = 0; g < groups; ++g)
        CHECK(fp8::bits_of(col[static_cast<std::size_t>(g * s[0] + m)]) == fp8::bits_of(row_major[static_cast<std::size_t>(m * groups + g)]));
    if (const auto* tma = c->at("output").as_object().if_contains("scale_col_major_tma_aligned_f32_hex")) {
      o.layout = fp8::scale_layout::column_major_tma;
      std::vector<float> t(static_cast<std::size_t>(fp8::scale_storage(o.layout, s[0], groups)));
      ref::per_token_group(view(x, s[0], s[1]), o, q.data(), t.data());
      const auto want = words(tma->at("storage"));
      REQUIRE(want.size() == t.size());
      const std::int64_t m4 = (s[0] + 3) / 4 * 4;
      for (std::int64_t g = 0; g < groups; ++g)
        for (std::int64_t m = 0; m < m4; ++m) {
          const auto k = static_cast<std::size_t>(g * m4 + m);
          if (m < s[0]) CHECK(fp8::bits_of(t[k]) == want[k]);
          else CHECK(t[k] == 0.0f);  // padding: qpolicy writes 0 (conformance ignores it)
        }
    }
  }
}

TEST_CASE("128x128 weight blocks", "[numerics]") {
  for (const auto* c : of_kind("block_128x128")) {
    INFO(c->at("id").as_string());
    const auto s = shape(c->at("input").at("shape"));
    const auto x = bf16(c->at("input"));
    fp8::block_options o;
    o.ue8m0 = c->at("params").at("use_ue8m0").as_bool();
    std::vector<std::uint8_t> q(x.size());
    std::vector<float> scales(static_cast<std::size_t>(((s[0] + 127) / 128) * ((s[1] + 127) / 128)));
    ref::block_128x128(view(x, s[0], s[1]), o, q.data(), scales.data());
    check_codes(q, codes(c->at("output").at("q_hex")));
    check_scales(scales.data(), words(c->at("output").at("weight_scale_inv_f32_hex")));
    if (const auto* alt = c->if_contains("alt_inductor_reciprocal_scale")) {  // the compiled variant
      o.compiled_variant = true;
      ref::block_128x128(view(x, s[0], s[1]), o, q.data(), scales.data());
      check_scales(scales.data(), words(alt->at("scales_f32_hex")));
      const auto& alt_q = alt->at("q_hex_if_different");
      check_codes(q, codes(alt_q.is_null() ? c->at("output").at("q_hex") : alt_q));
    }
  }
}

TEST_CASE("MoE experts per tensor and per block", "[numerics]") {
  for (const auto* c : of_kind("moe_per_tensor")) {
    INFO(c->at("id").as_string());
    const auto s13 = shape(c->at("input").at("w13").at("shape")), s2 = shape(c->at("input").at("w2").at("shape"));
    const auto x13 = bf16(c->at("input").at("w13")), x2 = bf16(c->at("input").at("w2"));
    std::vector<std::uint8_t> q13(x13.size()), q2(x2.size());
    std::vector<float> sc13(static_cast<std::size_t>(s13[0])), sc2(static_cast<std::size_t>(s2[0]));
    ref::moe_per_tensor(view(x13, s13[0] * s13[1], s13[2]), view(x2, s2[0] * s2[1], s2[2]), s13[0], q13.data(),
                        sc13.data(), q2.data(), sc2.data());
    check_codes(q13, codes(c->at("output").at("w13_q_hex")));
    check_codes(q2, codes(c->at("output").at("w2_q_hex")));
    check_scales(sc13.data(), words(c->at("output").at("w13_weight_scale_f32_hex")));
    check_scales(sc2.data(), words(c->at("output").at("w2_weight_scale_f32_hex")));
  }
  for (const auto* c : of_kind("moe_per_block")) {
    INFO(c->at("id").as_string());
    const auto s13 = shape(c->at("input").at("w13_unpadded").at("shape"));
    const auto s2 = shape(c->at("input").at("w2_unpadded").at("shape"));
    const auto x13 = bf16(c->at("input").at("w13_unpadded")), x2 = bf16(c->at("input").at("w2_unpadded"));
    const auto q13_shape = shape(c->at("output").at("w13_q_shape")), q2_shape = shape(c->at("output").at("w2_q_shape"));
    const auto sc13_shape = shape(c->at("output").at("w13_scale_shape")), sc2_shape = shape(c->at("output").at("w2_scale_shape"));
    std::vector<std::uint8_t> q13(static_cast<std::size_t>(q13_shape[0] * q13_shape[1] * q13_shape[2]));
    std::vector<std::uint8_t> q2(static_cast<std::size_t>(q2_shape[0] * q2_shape[1] * q2_shape[2]));
    std::vector<float> sc13(static_cast<std::size_t>(sc13_shape[0] * sc13_shape[1] * sc13_shape[2]));
    std::vector<float> sc2(static_cast<std::size_t>(sc2_shape[0] * sc2_shape[1] * sc2_shape[2]));
    ref::moe_per_block(view(x13, s13[0] * s13[1], s13[2]), view(x2, s2[0] * s2[1], s2[2]), s13[0], {}, q13.data(),
                       sc13.data(), q2.data(), sc2.data());
    check_codes(q13, codes(c->at("output").at("w13_q_hex_padded")));
    check_codes(q2, codes(c->at("output").at("w2_q_hex_padded")));
    check_scales(sc13.data(), words(c->at("output").at("w13_weight_scale_inv_f32_hex")));
    check_scales(sc2.data(), words(c->at("output").at("w2_weight_scale_inv_f32_hex")));
  }
}

TEST_CASE("e4m3fn bytes agree with ml_dtypes' float8_e4m3fn", "[numerics][witness]") {
  const char* python = std::getenv("QPOLICY_PYTHON");
  if (!python || !std::filesystem::exists(python) ||
      qpolicy::test::run_process({python, "-c", "import ml_dtypes, numpy"}).status != 0) {
    WARN("python3 with ml_dtypes is not installed (scripts/install-deps.sh sets up .venv-witness): witness skipped");
    return;
  }
  // Values around every rounding boundary of the format, plus random bit patterns and the specials.
  std::vector<float> values;
  for (int q = 0; q < 256; ++q) {
    const float v = fp8::decode(static_cast<std::uint8_t>(q));
    if (std::isnan(v)) continue;
    const auto b = fp8::bits_of(v);
    for (std::int64_t d = -3; d <= 3; ++d) values.push_back(fp8::float_of(static_cast<std::uint32_t>(b + d)));
    values.push_back(v * 1.0625f);  // halfway-ish between neighbours
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 20000; ++i) {
    const float v = fp8::float_of(static_cast<std::uint32_t>(rng()));
    if (std::fabs(v) < 1e6f && !std::isnan(v)) values.push_back(v);  // beyond +-464 both give NaN codes
  }
  for (float v : {0.0f, -0.0f, 464.0f, 464.00003f, -470.0f, 1e-30f, -1e-30f, 0x1p-10f, 0x1.8p-10f}) values.push_back(v);
  const qpolicy::test::temp_dir scratch("mld");
  const auto& dir = scratch.path();
  const auto in = (dir / "x.f32").string(), out = (dir / "q.u8").string();
  std::ofstream(in, std::ios::binary).write(reinterpret_cast<const char*>(values.data()),
                                            static_cast<std::streamsize>(values.size() * 4));
  const std::string script =
      "import sys, numpy as np, ml_dtypes\n"
      "x = np.fromfile(sys.argv[1], dtype=np.float32)\n"
      "x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8).tofile(sys.argv[2])\n";
  const auto r = qpolicy::test::run_process({python, "-c", script, in, out});
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::ifstream codes_in(out, std::ios::binary);
  std::vector<std::uint8_t> theirs(values.size());
  codes_in.read(reinterpret_cast<char*>(theirs.data()), static_cast<std::streamsize>(theirs.size()));
  REQUIRE(codes_in.gcount() == static_cast<std::streamsize>(values.size()));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto ours = fp8::tcvt_before_2_12(values[i]);  // ml_dtypes still turns overflow into NaN
    if (ours == theirs[i] || (is_nan_code(ours) && is_nan_code(theirs[i]))) continue;
    if (++bad <= 5) UNSCOPED_INFO("x = " << values[i] << ": ours " << int(ours) << ", ml_dtypes " << int(theirs[i]));
  }
  CHECK(bad == 0);
}

TEST_CASE("FP8 GEMM references within spec §10's bound", "[numerics][gemm]") {
  for (const auto* c : of_kind("gemm")) {
    INFO(c->at("id").as_string());
    const auto sa = shape(c->at("input").at("A").at("shape")), sb = shape(c->at("input").at("B").at("shape"));
    const auto a = bf16(c->at("input").at("A")), b = bf16(c->at("input").at("B"));
    const std::int64_t m = sa[0], k = sa[1], n = sb[0];
    const auto av = view(a, m, k), bv = view(b, n, k);
    std::vector<std::uint8_t> qa(a.size()), qb(b.size());
    std::vector<float> out(static_cast<std::size_t>(m * n));
    // The bound with float32 output: |out - ref| <= K * 2^-24 * T, T the sum of |scaled terms|.
    auto check = [&](const char* name, auto&& magnitude_sum) {
      const auto& want = c->at("output").at(name).as_array();
      REQUIRE(want.size() == out.size());
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          const double ref = std::stod(std::string(want[static_cast<std::size_t>(i * n + j)].as_string()));
          const double bound = static_cast<double>(k) * std::ldexp(1.0, -24) * magnitude_sum(i, j);
          INFO(name << " (" << i << ", " << j << "): got " << out[static_cast<std::size_t>(i * n + j)] << ", ref " << ref);
          CHECK(std::fabs(out[static_cast<std::size_t>(i * n + j)] - ref) <= bound);
        }
    };
    float s_a = 0, s_w = 0;
    std::vector<float> s_tok(static_cast<std::size_t>(m));
    ref::weight_per_tensor(bv, qb.data(), &s_w);
    ref::dynamic_per_tensor(av, qa.data(), &s_a);
    ref::gemm_scaled(qa.data(), &s_a, false, qb.data(), &s_w, false, m, n, k, out.data());
    check("per_tensor_x_per_tensor", [&](std::int64_t i, std::int64_t j) {
      double t = 0;
      for (std::int64_t x = 0; x < k; ++x)
        t += std::fabs(fp8::decode(qa[i * k + x]) * fp8::decode(qb[j * k + x]) * double(s_a) * s_w);
      return t;
    });
    ref::dynamic_per_token(av, qa.data(), s_tok.data());
    ref::gemm_scaled(qa.data(), s_tok.data(), true, qb.data(), &s_w, false, m, n, k, out.data());
    check("per_token_x_per_tensor", [&](std::int64_t i, std::int64_t j) {
      double t = 0;
      for (std::int64_t x = 0; x < k; ++x)
        t += std::fabs(fp8::decode(qa[i * k + x]) * fp8::decode(qb[j * k + x]) * double(s_tok[i]) * s_w);
      return t;
    });
    std::vector<float> sg(static_cast<std::size_t>(m * (k / 128))), sblk(static_cast<std::size_t>(((n + 127) / 128) * (k / 128)));
    ref::per_token_group(av, {}, qa.data(), sg.data());
    ref::block_128x128(bv, {}, qb.data(), sblk.data());
    ref::gemm_blocked(qa.data(), sg.data(), qb.data(), sblk.data(), m, n, k, out.data());
    check("block_1x128_x_128x128", [&](std::int64_t i, std::int64_t j) {
      double t = 0;
      for (std::int64_t x = 0; x < k; ++x)
        t += std::fabs(fp8::decode(qa[i * k + x]) * fp8::decode(qb[j * k + x]) * double(sg[i * (k / 128) + x / 128]) *
                       sblk[(j / 128) * (k / 128) + x / 128]);
      return t;
    });
  }
}
