// Every case of shared/conformance/new_schemes_cases.json driven from outside (cli.md, "Keys of vLLM
// 0.34's new schemes"): the inputs written to a safetensors file, `qpolicy quantize-tensor` run on it
// with the Hadamard keys (--rotated-out), lut_b (3-D expert stacks), --dequantize and the LUT-B experts'
// mxfp8 activations; the stored tensors read back and compared; and the refusals, which write nothing.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../support/new_schemes_cases.hpp"
#include "../support/process.hpp"
#include "../support/quantize_tensor_cli.hpp"
#include "../support/temp_dir.hpp"
#include "qpolicy/io/safetensors.hpp"

namespace st = qpolicy::safetensors;
using namespace qpolicy::test::new_schemes;

namespace {

/// A case's input as the file stores it: its own shape (3-D for LUT-B's expert stacks).
qpolicy::test::cli_input input_tensor_of(const bj::object& c, const input_tensor& x, const std::string& name) {
  return {name, x.type == qpolicy::element::f16 ? st::dtype::F16 : st::dtype::BF16, qpolicy::test::shape_of(c.at("input").at("shape")),
          std::as_bytes(std::span(x.bits))};
}

/// A stored tensor's bytes after checking its type and shape.
std::vector<std::uint8_t> stored(const st::file& f, const std::string& name, st::dtype type, const std::vector<std::int64_t>& shape) {
  auto bytes = qpolicy::test::stored_bytes(f, name);
  CHECK(f.find(name)->type == type);
  CHECK(f.find(name)->shape == shape);
  return bytes;
}

std::vector<std::uint8_t> as_bytes(const std::vector<std::uint16_t>& halves) {
  std::vector<std::uint8_t> out;
  for (const auto h : halves) {
    out.push_back(static_cast<std::uint8_t>(h & 0xFF));
    out.push_back(static_cast<std::uint8_t>(h >> 8));
  }
  return out;
}

}  // namespace

TEST_CASE("quantize-tensor --key mxfp4_hadamard32 / _dynamic / _rceil --rotated-out on every Hadamard case", "[cli][new_schemes]") {
  for (const char* kind : {"mxfp4_hadamard_weight_quant", "mxfp4_hadamard_act_quant"}) {
    const bool weight = std::string_view(kind) == "mxfp4_hadamard_weight_quant";
    std::vector<input_tensor> xs;
    std::vector<const bj::object*> cs;
    std::vector<qpolicy::test::cli_input> inputs;
    for (const auto* c : new_cases(kind)) {
      xs.push_back(input_of(c->at("input")));
      cs.push_back(c);
    }
    for (std::size_t i = 0; i < xs.size(); ++i) inputs.push_back(input_tensor_of(*cs[i], xs[i], std::string(cs[i]->at("id").as_string())));
    for (const std::string key : {weight ? "mxfp4_hadamard32" : "mxfp4_hadamard32_dynamic", weight ? "" : "mxfp4_hadamard32_rceil"}) {
      if (key.empty()) continue;
      const bool rceil = key == "mxfp4_hadamard32_rceil";
      const auto out = qpolicy::test::run_quantize_tensor(inputs, key, {"--rotated-out"});
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const std::string name(cs[i]->at("id").as_string());
        INFO(key << ": " << name);
        const auto& want = rceil ? cs[i]->at("flashinfer_rceil_variant").as_object() : cs[i]->at("output").as_object();
        const auto& x = xs[i];
        check_packed(stored(*out, name, st::dtype::U8, {x.rows, x.cols / 2}), want.at("q_packed_hex"));
        CHECK(stored(*out, name + ".scale", st::dtype::U8, {x.rows, x.cols / 32}) == bytes(want.at("scale_e8m0_hex")));
        CHECK(stored(*out, name + ".rotated", st::dtype::BF16, {x.rows, x.cols}) ==
              as_bytes(halves(cs[i]->at("output").at("rotated_bf16_hex"))));
      }
    }
  }
}

TEST_CASE("quantize-tensor --key lut_b on expert stacks, and --dequantize back to bf16 and fp16", "[cli][new_schemes]") {
  std::vector<input_tensor> xs;
  std::vector<const bj::object*> cs;
  for (const auto* c : new_cases("lut_b_weight_quant")) {
    xs.push_back(input_of(c->at("input")));
    cs.push_back(c);
  }
  std::vector<qpolicy::test::cli_input> inputs;
  for (std::size_t i = 0; i < xs.size(); ++i) inputs.push_back(input_tensor_of(*cs[i], xs[i], std::string(cs[i]->at("id").as_string())));
  const auto out = qpolicy::test::run_quantize_tensor(inputs, "lut_b", {});
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::string name(cs[i]->at("id").as_string());
    INFO(name);
    const auto& want = cs[i]->at("output").as_object();
    const auto grid = qpolicy::test::shape_of(want.at("scale_shape"));
    auto with = [&](std::int64_t last) {
      auto s = grid;
      s.push_back(last);
      return s;
    };
    CHECK(stored(*out, name, st::dtype::U8, with(192)) == bytes(want.at("packed_hex")));
    CHECK(stored(*out, name + ".codebook", st::dtype::F8_E4M3, with(8)) == bytes(want.at("codebook_e4m3_hex")));
    CHECK(stored(*out, name + ".scale", st::dtype::U8, grid) == bytes(want.at("scale_e8m0_hex")));
  }
  // The decode case: its tiles, codebooks and scales in, bf16 and fp16 out.
  for (const auto* c : new_cases("lut_b_dequant")) {
    const auto& in = c->at("input").as_object();
    const auto packed = bytes(in.at("packed_hex")), books = bytes(in.at("codebook_e4m3_hex")), scales = bytes(in.at("scale_e8m0_hex"));
    const std::vector<qpolicy::test::cli_input> parts{
        {"w", st::dtype::U8, qpolicy::test::shape_of(in.at("packed_shape")), std::as_bytes(std::span(packed))},
        {"w.codebook", st::dtype::F8_E4M3, qpolicy::test::shape_of(in.at("codebook_shape")), std::as_bytes(std::span(books))},
        {"w.scale", st::dtype::U8, qpolicy::test::shape_of(in.at("scale_shape")), std::as_bytes(std::span(scales))}};
    const auto shape = qpolicy::test::shape_of(c->at("output").at("shape"));
    const auto bf16 = qpolicy::test::run_quantize_tensor(parts, "lut_b", {"--dequantize"});
    CHECK(stored(*bf16, "w", st::dtype::BF16, shape) == as_bytes(halves(c->at("output").at("dequant_bf16_hex"))));
    const auto f16 = qpolicy::test::run_quantize_tensor(parts, "lut_b", {"--dequantize", "--dtype", "f16"});
    CHECK(stored(*f16, "w", st::dtype::F16, shape) == as_bytes(halves(c->at("output").at("dequant_f16_hex"))));
  }
}

TEST_CASE("quantize-tensor --key mxfp8 gives the LUT-B experts' activation codes", "[cli][new_schemes]") {
  for (const auto* c : new_cases("lut_b_act_mxfp8_qdq")) {
    const auto x = input_of(c->at("input"));
    const auto out = qpolicy::test::run_quantize_tensor({input_tensor_of(*c, x, "x")}, "mxfp8", {});
    check_e4m3_codes(stored(*out, "x", st::dtype::F8_E4M3, {x.rows, x.cols}), bytes(c->at("output").at("q_hex")));
    CHECK(stored(*out, "x.scale", st::dtype::U8, {x.rows, x.cols / 32}) == bytes(c->at("output").at("scale_e8m0_hex")));
  }
}

TEST_CASE("quantize-tensor refuses what the new schemes cannot take, and writes nothing", "[cli][new_schemes]") {
  const qpolicy::test::temp_dir dir("new_schemes_refusals");
  const std::string out = (dir.path() / "out.safetensors").string();
  const auto file = [&](const std::string& name, std::vector<std::int64_t> shape, st::dtype type = st::dtype::BF16) {
    const std::string path = (dir.path() / (name + ".safetensors")).string();
    std::int64_t n = 1;
    for (const auto d : shape) n *= d;
    const std::vector<std::byte> zeros(static_cast<std::size_t>(n * (type == st::dtype::BF16 ? 2 : 1)));
    st::file_writer w(path, {{"w", type, shape}}, {});
    w.write(zeros);
    w.finish();
    return path;
  };
  const auto k48 = file("k48", {8, 48}), n12 = file("n12", {12, 64}), good = file("good", {16, 128}), codes = file("codes", {2, 2, 192}, st::dtype::U8);
  const struct {
    std::vector<std::string> args;
    int status;
    std::string message;
  } cases[] = {
      {{"--key", "mxfp4_hadamard32", k48}, 2, "Input size per partition 48 is not divisible by the Hadamard size 32. (tensor 'w')"},
      {{"--key", "mxfp4_hadamard32_dynamic", k48}, 2, "Input size per partition 48 is not divisible by the Hadamard size 32."},
      {{"--key", "lut_b", n12}, 2, "LUT-B requires dims divisible by (8, 64), got (12, 64)"},
      {{"--key", "lut_b", k48}, 2, "LUT-B requires dims divisible by (8, 64), got (8, 48)"},
      {{"--key", "lut_b", "--scale-layout", "swizzled", good}, 2, "lut_b has one scale per 8x64 tile"},
      {{"--key", "mxfp4", "--rotated-out", good}, 1, "--rotated-out stores the Hadamard keys' rotated input; mxfp4 does not rotate"},
      {{"--key", "mxfp4", "--dequantize", good}, 2, "good.safetensors: no code tensor of mxfp4 to decode"},
      {{"--key", "lut_b", "--dequantize", codes}, 2, "w.scale must be U8 [2, 2] beside w [2, 2, 192] (lut_b's stored tensors); it is missing"},
      {{"--key", "lut_b", "--dtype", "f16", good}, 1, "--dtype is the output type of --dequantize"},
      {{"--key", "lut_b", "--dequantize", "--dtype", "f32", codes}, 2, "LUT-B decodes to bf16 or fp16 (new-schemes-numerics.md §B.4), not f32"},
      {{"--key", "lut_b", "--dequantize", "--dtype", "f64", codes}, 1, "--dtype must be"},
  };
  for (const auto& c : cases) qpolicy::test::check_quantize_tensor_refusal(c.args, c.status, c.message, out);
}
