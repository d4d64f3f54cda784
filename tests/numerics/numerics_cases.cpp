// Every case of shared/conformance/numerics_cases.json on the CPU reference: codes and scales bit for
// bit (a NaN code may carry either sign, spec §2), GEMM references within spec §10's bound.
#define CATCH_CONFIG_MAIN
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <tuple>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "qpolicy/kernels/cpu/reference.hpp"

namespace bj = boost::json;
namespace fp8 = qpolicy::fp8;
namespace ref = qpolicy::cpu::reference;

namespace {

const bj::array& cases() {
  static const bj::value doc = [] {
    const char* path = std::getenv("QPOLICY_NUMERICS_CASES");
    if (!path) FAIL("QPOLICY_NUMERICS_CASES is not set (run through meson test)");
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return bj::parse(s.str());
  }();
  return doc.at("cases").as_array();
}

std::vector<const bj::object*> of_kind(std::string_view kind) {
  std::vector<const bj::object*> out;
  for (const auto& c : cases())
    if (c.at("kind").as_string() == kind) out.push_back(&c.as_object());
  REQUIRE_FALSE(out.empty());
  return out;
}

std::uint32_t hex(std::string_view s) { return static_cast<std::uint32_t>(std::stoul(std::string(s), nullptr, 16)); }

std::vector<std::uint16_t> bf16(const bj::value& input) {
  const auto text = input.at("bf16_hex").as_string();
  std::vector<std::uint16_t> out;
  for (std::size_t i = 0; i + 4 <= text.size(); i += 4) out.push_back(static_cast<std::uint16_t>(hex({text.data() + i, 4})));
  return out;
}
std::vector<std::uint8_t> codes(const bj::value& text_value) {
  const auto text = text_value.as_string();
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 2 <= text.size(); i += 2) out.push_back(static_cast<std::uint8_t>(hex({text.data() + i, 2})));
  return out;
}
std::vector<std::uint32_t> words(const bj::value& list) {
  std::vector<std::uint32_t> out;
  for (const auto& v : list.as_array()) out.push_back(hex(v.as_string()));
  return out;
}
std::vector<std::int64_t> shape(const bj::value& v) {
  std::vector<std::int64_t> out;
  for (const auto& d : v.as_array()) out.push_back(d.to_number<std::int64_t>());
  return out;
}

bool is_nan_code(std::uint8_t q) { return (q & 0x7F) == 0x7F; }

void check_codes(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && !(is_nan_code(got[i]) && is_nan_code(want[i])) && bad++ == 0) first = i;
  INFO("first mismatch at " << first << ": got " << int(got[first]) << ", want " << int(want[first]));
  CHECK(bad == 0);
}
void check_scales(const float* got, const std::vector<std::uint32_t>& want) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto g = fp8::bits_of(got[i]);
    INFO("scale " << i << ": got " << std::hex << g << ", want " << want[i]);
    CHECK((g == want[i] || (fp8::is_nan(got[i]) && fp8::is_nan(fp8::float_of(want[i])))));
  }
}

fp8::input_view view(const std::vector<std::uint16_t>& data, std::int64_t rows, std::int64_t cols) {
  return {data.data(), fp8::element::bf16, rows, cols};
}

}  // namespace

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
    ref::group_options o;
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
    ref::block_options o;
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

// ---- the same vectors driven from outside: safetensors in, `qpolicy quantize-tensor`, safetensors out ----

#include <filesystem>

#include "../support/process.hpp"
#include "../support/temp_dir.hpp"
#include "qpolicy/io/safetensors.hpp"

namespace {

namespace st = qpolicy::safetensors;

struct cli_case {
  const bj::object* c;
  std::string tensor;  // its name in the input file
};

/// Runs quantize-tensor over every case of `kind` (with the given extra flags) and returns the output.
std::unique_ptr<st::file> run_cli(const std::vector<cli_case>& chosen, const std::string& key,
                                  const std::vector<std::string>& flags, const std::string& tag) {
  static const qpolicy::test::temp_dir scratch("num");  // removed when the tests end (outputs stay mapped until then)
  const auto& dir = scratch.path();
  const auto in = (dir / (tag + "_in.safetensors")).string(), out = (dir / (tag + "_out.safetensors")).string();
  std::vector<st::tensor_spec> specs;
  std::vector<std::vector<std::uint16_t>> data;
  for (const auto& k : chosen) {
    specs.push_back({k.tensor, st::dtype::BF16, shape(k.c->at("input").at("shape"))});
    data.push_back(bf16(k.c->at("input")));
  }
  st::file_writer w(in, specs, {});
  for (const auto& d : data) w.write(std::as_bytes(std::span(d)));
  w.finish();
  const char* exe = std::getenv("QPOLICY_EXE");
  REQUIRE(exe);
  std::vector<std::string> args{exe, "quantize-tensor", "--key", key, in, "-o", out};
  args.insert(args.end(), flags.begin(), flags.end());
  const auto r = qpolicy::test::run_process(args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return std::make_unique<st::file>(out);
}

std::vector<std::uint8_t> codes_of(const st::file& f, const std::string& name) {
  const auto d = f.data(*f.find(name));
  return {reinterpret_cast<const std::uint8_t*>(d.data()), reinterpret_cast<const std::uint8_t*>(d.data()) + d.size()};
}
std::vector<float> scales_of(const st::file& f, const std::string& name) {
  const auto d = f.data(*f.find(name + ".scale"));
  std::vector<float> out(d.size() / 4);
  std::memcpy(out.data(), d.data(), d.size());
  return out;
}

}  // namespace

TEST_CASE("the vectors through qpolicy quantize-tensor on safetensors files", "[numerics][cli]") {
  struct route {
    std::string kind, key, output_scale;
    std::vector<std::string> flags;
    std::function<bool(const bj::object&)> take;
  };
  const auto all = [](const bj::object&) { return true; };
  const auto ue8m0 = [](bool want) {
    return [want](const bj::object& c) { return c.at("params").at("use_ue8m0").as_bool() == want; };
  };
  const std::vector<route> routes{
      {"weight_per_tensor", "fp8_per_tensor_static", "weight_scale_f32_hex", {}, all},
      {"dynamic_per_tensor", "fp8_per_tensor_dynamic", "scale_f32_hex", {}, all},
      {"dynamic_per_token", "fp8_per_token", "scale_f32_hex", {}, all},
      {"weight_per_channel", "fp8_per_channel_static", "weight_scale_f32_hex", {}, all},
      {"block_128x128", "fp8_per_block_static", "weight_scale_inv_f32_hex", {}, ue8m0(false)},
      {"block_128x128", "fp8_per_block_static", "weight_scale_inv_f32_hex", {"--ue8m0"}, ue8m0(true)},
      {"per_token_group", "fp8_per_block_dynamic", "scale_row_major_f32_hex", {"--scale-layout", "row"}, ue8m0(false)},
      {"per_token_group", "fp8_per_block_dynamic", "scale_row_major_f32_hex", {"--ue8m0"}, ue8m0(true)},
  };
  int tag = 0;
  for (const auto& r : routes) {
    std::vector<cli_case> chosen;
    for (const auto* c : of_kind(r.kind))
      if (r.take(*c)) chosen.push_back({c, "case" + std::to_string(chosen.size())});
    if (chosen.empty()) continue;
    INFO(r.kind << " via --key " << r.key);
    const auto out = run_cli(chosen, r.key, r.flags, "r" + std::to_string(tag++));
    for (const auto& k : chosen) {
      INFO(k.c->at("id").as_string());
      check_codes(codes_of(*out, k.tensor), codes(k.c->at("output").at("q_hex")));
      const auto got = scales_of(*out, k.tensor);
      const auto want = words(k.c->at("output").at(r.output_scale));
      REQUIRE(got.size() == want.size());
      check_scales(got.data(), want);
    }
  }
  // The TMA-aligned column-major layout, stored as the padded buffer [K/128, align(M, 4)].
  std::vector<cli_case> tma;
  for (const auto* c : of_kind("per_token_group"))
    if (c->at("output").as_object().contains("scale_col_major_tma_aligned_f32_hex") && !c->at("params").at("use_ue8m0").as_bool())
      tma.push_back({c, "case" + std::to_string(tma.size())});
  const auto out = run_cli(tma, "fp8_per_block_dynamic", {"--scale-layout", "col-tma"}, "tma");
  for (const auto& k : tma) {
    const auto& storage = k.c->at("output").at("scale_col_major_tma_aligned_f32_hex").at("storage");
    const auto want = words(storage);
    const auto got = scales_of(*out, k.tensor);
    REQUIRE(got.size() == want.size());
    const auto s = shape(k.c->at("input").at("shape"));
    const std::int64_t m4 = (s[0] + 3) / 4 * 4;
    for (std::size_t i = 0; i < want.size(); ++i)
      if (static_cast<std::int64_t>(i) % m4 < s[0]) CHECK(fp8::bits_of(got[i]) == want[i]);
    CHECK(out->find(k.tensor + ".scale")->shape == std::vector<std::int64_t>{s[1] / 128, m4});
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

TEST_CASE("the MoE vectors through qpolicy quantize on an experts checkpoint", "[numerics][cli][moe]") {
  const char* exe = std::getenv("QPOLICY_EXE");
  REQUIRE(exe);
  const qpolicy::test::temp_dir scratch("moe");
  const auto& dir = scratch.path();
  // Splits the case's w13 [E, 2I, H] into gate/up and w2 [E, H, I] into down, under vLLM's names.
  auto checkpoint = [&](const bj::value& w13, const bj::value& w2, const std::string& path) {
    const auto s13 = shape(w13.at("shape")), s2 = shape(w2.at("shape"));
    const auto x13 = bf16(w13), x2 = bf16(w2);
    const std::int64_t experts = s13[0], inter = s13[1] / 2, hidden = s13[2];
    std::vector<st::tensor_spec> specs;
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto p = "model.layers.0.mlp.experts." + std::to_string(e) + ".";
      specs.push_back({p + "gate_proj.weight", st::dtype::BF16, {inter, hidden}});
      specs.push_back({p + "up_proj.weight", st::dtype::BF16, {inter, hidden}});
      specs.push_back({p + "down_proj.weight", st::dtype::BF16, {s2[1], s2[2]}});
    }
    st::file_writer w(path, specs, {});
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto* g = x13.data() + e * 2 * inter * hidden;
      w.write(std::as_bytes(std::span(g, static_cast<std::size_t>(2 * inter * hidden))));  // gate, then up
      w.write(std::as_bytes(std::span(x2.data() + e * s2[1] * s2[2], static_cast<std::size_t>(s2[1] * s2[2]))));
    }
    w.finish();
    return std::tuple{experts, inter, hidden, s2[1]};
  };
  auto quantize = [&](const std::string& scheme, const std::string& in, const std::string& out) {
    const auto r = qpolicy::test::run_process({exe, "quantize", "-q", scheme, "-o", out, in});
    INFO(r.err);
    REQUIRE(r.status == 0);
    return std::make_unique<st::file>(out);
  };
  // Rows [r0, r0 + rows) and columns [0, cols) of a row-major [*, width] code matrix.
  auto crop = [](const std::vector<std::uint8_t>& all, std::int64_t offset, std::int64_t width, std::int64_t r0,
                 std::int64_t rows, std::int64_t cols) {
    std::vector<std::uint8_t> out;
    for (std::int64_t r = r0; r < r0 + rows; ++r)
      out.insert(out.end(), all.begin() + offset + r * width, all.begin() + offset + r * width + cols);
    return out;
  };
  for (const auto* c : of_kind("moe_per_tensor")) {
    INFO(c->at("id").as_string());
    const auto in = (dir / "pt_in.safetensors").string();
    const auto [experts, inter, hidden, down_rows] = checkpoint(c->at("input").at("w13"), c->at("input").at("w2"), in);
    const auto f = quantize("fp8_per_tensor", in, (dir / "pt_out.safetensors").string());
    const auto q13 = codes(c->at("output").at("w13_q_hex")), q2 = codes(c->at("output").at("w2_q_hex"));
    const auto s13 = words(c->at("output").at("w13_weight_scale_f32_hex")), s2 = words(c->at("output").at("w2_weight_scale_f32_hex"));
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto p = "model.layers.0.mlp.experts." + std::to_string(e) + ".";
      const std::int64_t base = e * 2 * inter * hidden;
      check_codes(codes_of(*f, p + "gate_proj.weight"), crop(q13, base, hidden, 0, inter, hidden));
      check_codes(codes_of(*f, p + "up_proj.weight"), crop(q13, base, hidden, inter, inter, hidden));
      check_codes(codes_of(*f, p + "down_proj.weight"), crop(q2, e * down_rows * inter, inter, 0, down_rows, inter));
      for (const auto* proj : {"gate_proj", "up_proj"}) {  // one w13 scale shared by gate and up
        const auto d = f->data(*f->find(p + proj + ".weight_scale"));
        float s = 0;
        std::memcpy(&s, d.data(), 4);
        check_scales(&s, {s13[static_cast<std::size_t>(e)]});
      }
      const auto d = f->data(*f->find(p + "down_proj.weight_scale"));
      float s = 0;
      std::memcpy(&s, d.data(), 4);
      check_scales(&s, {s2[static_cast<std::size_t>(e)]});
    }
  }
  for (const auto* c : of_kind("moe_per_block")) {
    INFO(c->at("id").as_string());
    const auto in = (dir / "pb_in.safetensors").string();
    const auto [experts, inter, hidden, down_rows] =
        checkpoint(c->at("input").at("w13_unpadded"), c->at("input").at("w2_unpadded"), in);
    const auto f = quantize("fp8_per_block", in, (dir / "pb_out.safetensors").string());
    const auto q13 = codes(c->at("output").at("w13_q_hex_padded")), q2 = codes(c->at("output").at("w2_q_hex_padded"));
    const auto s13 = words(c->at("output").at("w13_weight_scale_inv_f32_hex"));
    const auto s2 = words(c->at("output").at("w2_weight_scale_inv_f32_hex"));
    const std::int64_t ip = (inter + 127) / 128 * 128, hp = (hidden + 127) / 128 * 128;
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto p = "model.layers.0.mlp.experts." + std::to_string(e) + ".";
      // Each matrix blocked on its own equals the padded w13/w2 blocks, cropped (spec §12).
      check_codes(codes_of(*f, p + "gate_proj.weight"), crop(q13, e * 2 * ip * hp, hp, 0, inter, hidden));
      check_codes(codes_of(*f, p + "up_proj.weight"), crop(q13, e * 2 * ip * hp, hp, ip, inter, hidden));
      check_codes(codes_of(*f, p + "down_proj.weight"), crop(q2, e * hp * ip, ip, 0, hidden, inter));
      const std::int64_t cb13 = hp / 128, rb13 = 2 * ip / 128;
      const auto gate_s = f->data(*f->find(p + "gate_proj.weight_scale_inv")), up_s = f->data(*f->find(p + "up_proj.weight_scale_inv"));
      const auto down_s = f->data(*f->find(p + "down_proj.weight_scale_inv"));
      const std::int64_t gate_blocks = (inter + 127) / 128, col_blocks = (hidden + 127) / 128;
      for (std::int64_t bi = 0; bi < gate_blocks; ++bi)
        for (std::int64_t bj = 0; bj < col_blocks; ++bj) {
          float g = 0, u = 0;
          std::memcpy(&g, gate_s.data() + 4 * (bi * col_blocks + bj), 4);
          std::memcpy(&u, up_s.data() + 4 * (bi * col_blocks + bj), 4);
          check_scales(&g, {s13[static_cast<std::size_t>(e * rb13 * cb13 + bi * cb13 + bj)]});
          check_scales(&u, {s13[static_cast<std::size_t>(e * rb13 * cb13 + (ip / 128 + bi) * cb13 + bj)]});
        }
      const std::int64_t rb2 = hp / 128, cb2 = ip / 128, down_rb = (hidden + 127) / 128, down_cb = (inter + 127) / 128;
      for (std::int64_t bi = 0; bi < down_rb; ++bi)
        for (std::int64_t bj = 0; bj < down_cb; ++bj) {
          float d = 0;
          std::memcpy(&d, down_s.data() + 4 * (bi * down_cb + bj), 4);
          check_scales(&d, {s2[static_cast<std::size_t>(e * rb2 * cb2 + bi * cb2 + bj)]});
        }
    }
  }
}

#include "qpolicy/kernels/cpu/gemm_reference.hpp"

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
