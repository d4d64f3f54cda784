// Every quantizer case of shared/conformance/low_precision_cases.json driven from outside: the case
// inputs written to a safetensors file (bf16 or fp16), `qpolicy quantize-tensor --key K` run on it, the
// stored tensors read back and compared with the vectors (cli.md's table of low-precision keys):
// codes, block scales row-major and in the 128x4 layout, per-row and per-tensor float32 scales.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../support/low_precision_cases.hpp"
#include "../support/process.hpp"
#include "../support/quantize_tensor_cli.hpp"
#include "../support/temp_dir.hpp"
#include "qpolicy/io/safetensors.hpp"
#include "qpolicy/numerics/block_formats.hpp"

namespace st = qpolicy::safetensors;
namespace lp = qpolicy::lp;
using namespace qpolicy::test::low_precision;

namespace {

/// One input tensor of the file and where its expectations are.
struct cli_tensor {
  std::string id;  // the case (and part) it comes from, for messages
  input_tensor x;
  const bj::object* out = nullptr;
  std::string prefix;  // of the expected fields: "" or "w13_" / "w2_"
  std::string name() const { return id; }  // unique within a file
};

/// Writes the tensors, runs quantize-tensor with `key` and `flags`, and opens its output.
std::unique_ptr<st::file> run_cli(const std::vector<cli_tensor>& tensors, const std::string& key, const std::vector<std::string>& flags) {
  std::vector<qpolicy::test::cli_input> inputs;
  for (const auto& t : tensors)
    inputs.push_back({t.name(), t.x.type == qpolicy::element::f16 ? st::dtype::F16 : st::dtype::BF16, {t.x.rows, t.x.cols},
                      std::as_bytes(std::span(t.x.bits))});
  return qpolicy::test::run_quantize_tensor(inputs, key, flags);
}

/// A stored tensor's bytes, after checking its type and shape.
std::vector<std::uint8_t> stored(const st::file& f, const std::string& name, st::dtype type, const std::vector<std::int64_t>& shape) {
  auto bytes = qpolicy::test::stored_bytes(f, name);
  CHECK(f.find(name)->type == type);
  CHECK(f.find(name)->shape == shape);
  return bytes;
}
std::vector<std::uint32_t> stored_words(const st::file& f, const std::string& name, const std::vector<std::int64_t>& shape) {
  const auto b = stored(f, name, st::dtype::F32, shape);
  std::vector<std::uint32_t> out(b.size() / 4);
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

/// The swizzled storage [Mp, Sp] against the row-major expectation, on the slots that hold a scale.
void check_swizzled_storage(const std::vector<std::uint8_t>& storage, std::int64_t rows, std::int64_t per_row,
                            const std::vector<std::uint8_t>& row_major) {
  REQUIRE(static_cast<std::int64_t>(storage.size()) == lp::swizzled_rows(rows) * lp::swizzled_cols(per_row));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < per_row; ++k) {
      INFO("scale (" << r << ", " << k << ")");
      REQUIRE(storage[static_cast<std::size_t>(lp::swizzled_offset(r, k, per_row))] == row_major[static_cast<std::size_t>(r * per_row + k)]);
    }
}

/// The single-input cases of `kind`, and the w13/w2 parts of MoE cases.
std::vector<cli_tensor> tensors_of(std::string_view kind) {
  std::vector<cli_tensor> out;
  for (const auto* c : cases_of_kind(kind)) {
    const auto& input = c->at("input").as_object();
    const std::string id(c->at("id").as_string());
    if (input.contains("shape")) out.push_back({id, input_of(input), &c->at("output").as_object(), ""});
    else
      for (const char* part : {"w13", "w2"}) out.push_back({id + " " + part, input_of(input.at(part)), &c->at("output").as_object(), std::string(part) + "_"});
  }
  return out;
}

/// Block-formula expectations: codes (e4m3 or packed e2m1) and E8M0 scales, row-major and swizzled.
void check_mx_run(const std::vector<cli_tensor>& tensors, const std::string& key, bool packed,
                  const std::function<const bj::object&(const cli_tensor&)>& expected) {
  const auto row = run_cli(tensors, key, {});
  const auto swz = run_cli(tensors, key, {"--scale-layout", "swizzled"});
  for (const auto& t : tensors) {
    INFO(t.id << " via --key " << key);
    const auto& e = expected(t);
    const std::int64_t per_row = t.x.cols / 32;
    const auto q_shape = std::vector<std::int64_t>{t.x.rows, packed ? t.x.cols / 2 : t.x.cols};
    const auto code_type = packed ? st::dtype::U8 : st::dtype::F8_E4M3;
    const auto want_q = bytes(e.at(t.prefix + (packed ? (e.contains(t.prefix + "q_packed_hex") ? "q_packed_hex" : "q_packed_hex_padded") : "q_hex")));
    const auto want_s = bytes(e.at(t.prefix + "scale_e8m0_hex"));
    for (const auto* f : {row.get(), swz.get()}) {
      const auto q = stored(*f, t.name(), code_type, q_shape);
      if (packed) check_packed(q, want_q);
      else check_e4m3_codes(q, want_q);
    }
    CHECK(stored(*row, t.name() + ".scale", st::dtype::U8, {t.x.rows, per_row}) == want_s);
    const auto storage = stored(*swz, t.name() + ".scale", st::dtype::U8, {lp::swizzled_rows(t.x.rows), lp::swizzled_cols(per_row)});
    check_swizzled_storage(storage, t.x.rows, per_row, want_s);
    if (e.contains(t.prefix + "scale_swizzled_128x4_hex")) {
      const auto want_swz = bytes(e.at(t.prefix + "scale_swizzled_128x4_hex"));
      check_swizzled_storage(want_swz, t.x.rows, per_row, want_s);  // the vectors' own layout agrees
    }
  }
}

/// The case's padded MoE experts (§4.1) as bf16 tensors [E * rows, cols]: zero padding, gate rows at
/// 0, up rows at Ip.
std::vector<cli_tensor> padded_mxfp4_experts() {
  std::vector<cli_tensor> out;
  for (const auto* c : cases_of_kind("mxfp4_moe")) {
    const auto& p = c->at("params").as_object();
    const std::int64_t experts = p.at("experts").as_int64();
    const std::int64_t inter = p.at("unpadded").at("intermediate").as_int64(), hidden = p.at("unpadded").at("hidden").as_int64();
    const std::int64_t ip = p.at("padded").at("intermediate").as_int64(), hp = p.at("padded").at("hidden").as_int64();
    const auto w13 = input_of(c->at("input").at("w13_unpadded")), w2 = input_of(c->at("input").at("w2_unpadded"));
    input_tensor p13{std::vector<std::uint16_t>(static_cast<std::size_t>(experts * 2 * ip * hp)), w13.type, experts * 2 * ip, hp};
    input_tensor p2{std::vector<std::uint16_t>(static_cast<std::size_t>(experts * hp * ip)), w2.type, experts * hp, ip};
    for (std::int64_t e = 0; e < experts; ++e) {
      for (std::int64_t r = 0; r < 2 * inter; ++r)
        for (std::int64_t k = 0; k < hidden; ++k)
          p13.bits[static_cast<std::size_t>((e * 2 * ip + (r < inter ? r : ip + r - inter)) * hp + k)] =
              w13.bits[static_cast<std::size_t>((e * 2 * inter + r) * hidden + k)];
      for (std::int64_t r = 0; r < hidden; ++r)
        for (std::int64_t k = 0; k < inter; ++k)
          p2.bits[static_cast<std::size_t>((e * hp + r) * ip + k)] = w2.bits[static_cast<std::size_t>((e * hidden + r) * inter + k)];
    }
    const std::string id(c->at("id").as_string());
    out.push_back({id + " w13", std::move(p13), &c->at("output").as_object(), "w13_"});
    out.push_back({id + " w2", std::move(p2), &c->at("output").as_object(), "w2_"});
  }
  return out;
}

}  // namespace

TEST_CASE("low-precision vectors through quantize-tensor: MXFP8 (§3.2, §3.3) and MXFP4 (§4.2, §4.3)", "[cli][low_precision]") {
  const auto same = [](const cli_tensor& t) -> const bj::object& { return *t.out; };
  auto mx8 = tensors_of("mxfp8_quant");
  for (auto& t : tensors_of("mxfp8_moe")) mx8.push_back(std::move(t));
  check_mx_run(mx8, "mxfp8", false, same);
  // Blackwell's path: the same bytes on ordinary data, its own where a case lists them.
  const auto mx8_quant = tensors_of("mxfp8_quant");
  check_mx_run(mx8_quant, "mxfp8_dynamic", false, [](const cli_tensor& t) -> const bj::object& {
    const auto& fi = low_precision_case(t.id).at("flashinfer_variant").as_object();
    return fi.at("same_as_torch_path").as_bool() ? *t.out : fi;
  });
  auto mx4 = tensors_of("mxfp4_quant");
  for (auto& t : tensors_of("mxfp4_act_qdq")) mx4.push_back(std::move(t));
  for (auto& t : padded_mxfp4_experts()) mx4.push_back(std::move(t));
  check_mx_run(mx4, "mxfp4", true, same);
  check_mx_run(tensors_of("mxfp4_act_flashinfer"), "mxfp4_dynamic", true, same);
}

TEST_CASE("low-precision vectors through quantize-tensor: INT8 per channel (§5.2)", "[cli][low_precision]") {
  const auto tensors = tensors_of("int8_moe");  // [E, R, C] as [E * R, C]: one scale per row
  const auto out = run_cli(tensors, "int8_per_channel_static", {});
  for (const auto& t : tensors) {
    INFO(t.id);
    CHECK(stored(*out, t.name(), st::dtype::I8, {t.x.rows, t.x.cols}) == bytes(t.out->at(t.prefix + "q_hex")));
    const auto& want = t.out->at(t.prefix + "scale_f32_hex").as_array();
    const auto got = stored_words(*out, t.name() + ".scale", {t.x.rows, 1});
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == hex32(want[i]));
  }
}

TEST_CASE("low-precision vectors through quantize-tensor: NVFP4 weights (§6.2) and per-token activations (§6.3)",
          "[cli][low_precision]") {
  for (const auto* c : cases_of_kind("nvfp4_moe_weight")) {
    INFO(c->at("id").as_string());
    // The whole tensor is one expert matrix (cli.md): one tensor per expert.
    const auto x = input_of(c->at("input"));
    const std::int64_t experts = c->at("params").at("experts").as_int64(), rows = c->at("params").at("rows").as_int64();
    std::vector<cli_tensor> tensors;
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto first = x.bits.begin() + static_cast<std::ptrdiff_t>(e * rows * x.cols);
      tensors.push_back({"expert " + std::to_string(e), {std::vector<std::uint16_t>(first, first + rows * x.cols), x.type, rows, x.cols},
                         &c->at("output").as_object(), ""});
    }
    const auto out = run_cli(tensors, "nvfp4", {});
    const auto& o = c->at("output").as_object();
    const auto want_q = bytes(o.at("q_packed_hex")), want_sf = bytes(o.at("sf_e4m3_hex"));
    const auto q_per = static_cast<std::ptrdiff_t>(rows * x.cols / 2), sf_per = static_cast<std::ptrdiff_t>(rows * x.cols / 16);
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto& t = tensors[static_cast<std::size_t>(e)];
      INFO(t.id);
      check_packed(stored(*out, t.name(), st::dtype::U8, {rows, x.cols / 2}),
                   std::vector<std::uint8_t>(want_q.begin() + e * q_per, want_q.begin() + (e + 1) * q_per));
      CHECK(stored(*out, t.name() + ".scale", st::dtype::F8_E4M3, {rows, x.cols / 16}) ==
            std::vector<std::uint8_t>(want_sf.begin() + e * sf_per, want_sf.begin() + (e + 1) * sf_per));
      CHECK(stored_words(*out, t.name() + ".scale_2", {1}).at(0) == hex32(o.at("weight_scale_2_f32_hex").as_array()[static_cast<std::size_t>(e)]));
    }
  }
  const auto tensors = tensors_of("nvfp4_act_per_token");
  const auto out = run_cli(tensors, "nvfp4_per_token", {});
  const auto swz = run_cli(tensors, "nvfp4_per_token", {"--scale-layout", "swizzled"});
  for (const auto& t : tensors) {
    INFO(t.id);
    const auto& c = low_precision_case(t.id);
    auto q = stored(*out, t.name(), st::dtype::U8, {t.x.rows, t.x.cols / 2});
    auto want = bytes(t.out->at("q_packed_hex"));
    // Codes the vectors call unspecified (0 * inf in a block whose scale rounds to zero) are not compared.
    for (const auto& u : c.at("codes_with_unspecified_value").as_array()) {
      const auto at = static_cast<std::size_t>((u.at("row").as_int64() * t.x.cols + u.at("col").as_int64()) / 2);
      const std::uint8_t keep = u.at("col").as_int64() % 2 ? 0x0F : 0xF0;
      q[at] &= keep;
      want[at] &= keep;
    }
    check_packed(q, want);
    const auto want_sf = bytes(t.out->at("sf_e4m3_hex"));
    CHECK(stored(*out, t.name() + ".scale", st::dtype::F8_E4M3, {t.x.rows, t.x.cols / 16}) == want_sf);
    check_swizzled_storage(stored(*swz, t.name() + ".scale", st::dtype::F8_E4M3,
                                  {lp::swizzled_rows(t.x.rows), lp::swizzled_cols(t.x.cols / 16)}),
                           t.x.rows, t.x.cols / 16, want_sf);
    const auto& want_st = t.out->at("per_token_scale_f32_hex").as_array();
    const auto got_st = stored_words(*out, t.name() + ".scale_per_token", {t.x.rows, 1});
    for (std::size_t r = 0; r < got_st.size(); ++r) CHECK(got_st[r] == hex32(want_st[r]));
  }
}

TEST_CASE("quantize-tensor refuses what a low-precision formula cannot take, before writing anything", "[cli][low_precision]") {
  const qpolicy::test::temp_dir scratch("lpe");
  const auto write = [&](const std::string& name, st::dtype type, std::int64_t rows, std::int64_t cols) {
    const auto path = (scratch.path() / name).string();
    const std::vector<std::uint8_t> zeros(static_cast<std::size_t>(rows * cols) * st::size_of(type));
    st::file_writer w(path, {{"w", type, {rows, cols}}}, {});
    w.write(std::as_bytes(std::span(zeros)));
    w.finish();
    return path;
  };
  const auto k48 = write("k48.safetensors", st::dtype::BF16, 2, 48), k40 = write("k40.safetensors", st::dtype::F16, 2, 40),
             f32 = write("f32.safetensors", st::dtype::F32, 2, 64), good = write("good.safetensors", st::dtype::BF16, 2, 64);
  const auto out = (scratch.path() / "out.safetensors").string();
  const struct {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"--key", "mxfp8", k48}, "MXFP8 requires input_size_per_partition (48) to be divisible by 32. (tensor 'w')"},
      {{"--key", "mxfp8_dynamic", k48}, "MXFP8 requires input_size_per_partition (48) to be divisible by 32."},
      {{"--key", "mxfp4", k48}, "MXFP4 requires input_size_per_partition (48) to be divisible by 32."},
      {{"--key", "mxfp4_dynamic", k48}, "MXFP4 requires input_size_per_partition (48) to be divisible by 32."},
      {{"--key", "nvfp4", k40}, "last dim must be a multiple of 16, got 40"},
      {{"--key", "nvfp4_per_token", k40}, "last dim must be a multiple of 16, got 40"},
      {{"--key", "int8_per_channel_static", f32}, "int8_per_channel_static computes in the model's dtype"},
      {{"--key", "nvfp4", f32}, "takes bf16 or fp16 tensors, not F32"},
      {{"--key", "nvfp4_per_token", f32}, "takes bf16 or fp16 tensors, not F32"},
      {{"--key", "fp8_per_token", "--scale-layout", "swizzled", good}, "fp8_per_token stores float32 scales"},
      {{"--key", "int8_per_channel_static", "--scale-layout", "swizzled", good}, "has one float32 scale per row"},
      {{"--key", "mxfp4", "--scale-layout", "col-tma", good}, "mxfp4 stores its scales row or swizzled"},
      {{"--key", "mxfp8", "--ue8m0", good}, "mxfp8's scales have their own encoding"},
      {{"--key", "nvfp5", good}, "unknown quantization name 'nvfp5'; quantize-tensor takes fp8_per_tensor_static"},
  };
  for (const auto& c : cases) qpolicy::test::check_quantize_tensor_refusal(c.args, 2, c.message, out);
  // fp32 is fine for the formulas that compute in float32.
  for (const char* key : {"mxfp8", "mxfp8_dynamic", "mxfp4", "mxfp4_dynamic"}) {
    const auto r = qpolicy::test::run_process({std::getenv("QPOLICY_EXE"), "quantize-tensor", "--key", key, f32, "-o", out});
    INFO(key << "\n" << r.err);
    CHECK(r.status == 0);
  }
}

TEST_CASE("plan Qwen3-30B-A3B with nvfp4_per_token and mxfp4, then quantize-tensor an expert weight", "[cli][low_precision]") {
  const char* exe = std::getenv("QPOLICY_EXE");
  const char* models = std::getenv("QPOLICY_MODELS");
  REQUIRE(exe);
  REQUIRE(models);
  const std::string model = std::string(models) + "/qwen3-30b-a3b.json";
  const auto nv = qpolicy::test::run_process({exe, "plan", "-q", "nvfp4_per_token", "--model", model});
  INFO(nv.err);
  REQUIRE(nv.status == 0);
  CHECK_THAT(nv.out, Catch::Contains("nvfp4_per_token MoE layers (48): emulation of Blackwell's TRT-LLM NVFP4 MoE"));
  // -q mxfp4 alone defers to the checkpoint (a checkpoint method name); with a config it is online up
  // to vLLM 0.33 (0.34 returns the config unmerged).
  const auto mx = qpolicy::test::run_process(
      {exe, "plan", "--vllm", "0.33", "-q", "mxfp4", "-c", R"({"ignore": ["re:.*self_attn.*"]})", "--model", model});
  INFO(mx.err);
  REQUIRE(mx.status == 0);
  CHECK_THAT(mx.out, Catch::Contains("mxfp4 MoE layers (48): emulation: activations MXFP4 quantize-dequantized"));
  // --check-shapes applies the schemes' size rules with vLLM's messages: I = 768 / 32 ranks = 24.
  const auto shapes = qpolicy::test::run_process(
      {exe, "plan", "-q", "online", "-c", R"({"moe": "mxfp8"})", "--model", model, "--check-shapes", "--tp", "32"});
  CHECK_THAT(shapes.out + shapes.err, Catch::Contains("model.layers.0.mlp.experts: Online MXFP8 MoE requires hidden/intermediate sizes divisible by 32."));
  const auto padded = qpolicy::test::run_process(
      {exe, "plan", "-q", "online", "-c", R"({"moe": "mxfp4"})", "--model", model, "--check-shapes", "--tp", "32"});
  CHECK_THAT(padded.out + padded.err, Catch::Contains("expert weights are zero-padded (vLLM's maybe_roundup_sizes)"));
  // One expert's w13 [2I, H] = [1536, 2048], as the plan's MoE layers hold them.
  const std::int64_t rows = 1536, cols = 2048;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  input_tensor w{std::vector<std::uint16_t>(static_cast<std::size_t>(rows * cols)), qpolicy::element::bf16, rows, cols};
  for (auto& b : w.bits) b = qpolicy::fp8::to_bf16(normal(rng));
  const std::vector<cli_tensor> tensors{{"model.layers.0.mlp.experts.0.w13", std::move(w), nullptr, ""}};
  const auto nv4 = run_cli(tensors, "nvfp4", {});
  CHECK(stored(*nv4, tensors[0].name(), st::dtype::U8, {rows, cols / 2}).size() == static_cast<std::size_t>(rows * cols / 2));
  CHECK(stored(*nv4, tensors[0].name() + ".scale", st::dtype::F8_E4M3, {rows, cols / 16}).size() == static_cast<std::size_t>(rows * cols / 16));
  const auto scale2 = stored_words(*nv4, tensors[0].name() + ".scale_2", {1});
  CHECK(qpolicy::fp8::float_of(scale2[0]) > 0.0f);
  const auto mx4 = run_cli(tensors, "mxfp4", {"--scale-layout", "swizzled"});
  CHECK(stored(*mx4, tensors[0].name() + ".scale", st::dtype::U8, {rows, cols / 32}).size() == static_cast<std::size_t>(rows * cols / 32));
}
