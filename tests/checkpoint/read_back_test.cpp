// Every directory `qpolicy quantize` writes from an already-quantized checkpoint, read back: the Quark
// checkpoint that keeps gpt-oss's fused MXFP4 experts and the ModelOpt MIXED_PRECISION checkpoint that
// keeps ModelOpt NVFP4 experts are planned as vLLM 0.34 reads them and converted once more. Kept layers
// stay byte for byte with the config entries that decided them; requantized ones are the first
// conversion's tensors decoded (by the decode written from the formats in tests/support) and quantized
// with the online formula.
#include <catch2/catch.hpp>

#include <algorithm>

#include "../support/quantized_dirs.hpp"
#include "../support/temp_dir.hpp"

namespace {

using namespace qpolicy::test::quantized_dirs;

/// `plan --model-dir DIR [-c CONFIG]`: its status and stderr.
qpolicy::test::process_result plan_of(const fs::path& dir, const std::string& config = "") {
  std::vector<std::string> args{"plan", "--model-dir", dir.string()};
  if (!config.empty()) args.insert(args.end(), {"-c", config});
  return run(std::move(args));
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

/// The second conversion against the first: the same tensors (names, dtypes, shapes); the modules in
/// `requantized_modules` (M.weight and M.weight_scale) as `decoder`'s decode of the first's tensors quantized by
/// `online`, every other tensor byte for byte; the same quantization_config.
void check_second_conversion(const fs::path& first, const fs::path& second, const std::vector<std::string>& requantized_modules,
                             formula decoder, formula online) {
  const auto once = tensors_of(first), twice = tensors_of(second);
  REQUIRE(twice.size() == once.size());
  auto requantized_tensor = [&](const std::string& name) {
    return std::any_of(requantized_modules.begin(), requantized_modules.end(), [&](const auto& m) { return name.starts_with(m + ".weight"); });
  };
  for (const auto& [name, t] : once) {
    INFO(name);
    REQUIRE(twice.count(name));
    CHECK(twice.at(name).type == t.type);
    CHECK(twice.at(name).shape == t.shape);
    if (!requantized_tensor(name)) CHECK(twice.at(name).bytes == t.bytes);
  }
  for (const auto& m : requantized_modules) {
    INFO(m);
    const auto& shape = once.at(m + ".weight").shape;  // FP8 codes: one byte a weight
    const auto [codes, scales] = requantized(decoder, once, m + ".weight", m + ".weight_scale", nullptr, shape[0], shape[1], online);
    CHECK(twice.at(m + ".weight").bytes == codes);
    CHECK(twice.at(m + ".weight_scale").bytes == scales);
  }
  CHECK(quantization_config(second) == quantization_config(first));
}

/// `projection` of both layers' attention: model.layers.{0,1}.self_attn.P for each P.
std::vector<std::string> attention_modules(std::initializer_list<const char*> projections) {
  std::vector<std::string> out;
  for (int l = 0; l < 2; ++l)
    for (const char* p : projections) out.push_back("model.layers." + std::to_string(l) + ".self_attn." + p);
  return out;
}

}  // namespace

TEST_CASE("a Quark checkpoint quantize wrote is planned and converted again", "[checkpoint][quantize][requantize][read-back]") {
  const qpolicy::test::temp_dir tmp("read-back-quark");
  const auto oss = gpt_oss_dir(tmp.path());
  const auto first = tmp.path() / "first";
  const std::string config = R"({"linear": "fp8_per_channel"})";
  ok({"quantize", "-c", config, oss.string(), "-o", first.string()});

  SECTION("planned: the kept experts and the online layers, each by its layer_quant_config entry") {
    const auto r = plan_of(first);
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("kept (the checkpoint's quark): 6") && Catch::Contains("unquantized: 4"));
    CHECK_THAT(r.out, Catch::Contains("layer_quant_config 'model.layers.1.mlp.experts'"));
    CHECK_THAT(r.out, Catch::Contains("layer_quant_config 'model.layers.0.self_attn.q_proj'"));
  }

  SECTION("the same online config: vLLM 0.34 refuses (QuarkLinearMethod decodes MXFP8 only), the error line first") {
    const auto r = plan_of(first, config);
    CHECK(r.status == 2);
    CHECK(first_line(r.err) == "error: Quark weight dequantization is only supported for MXFP8.");
  }

  SECTION("converted again: qkv kept byte for byte, o_proj requantized from its FP8 codes, the same config") {
    const auto second = tmp.path() / "second";
    const auto err = ok({"quantize", "-c", R"({"linear": "fp8_per_channel", "ignore": ["re:.*qkv_proj"]})", first.string(), "-o", second.string()});
    CHECK_THAT(err, Catch::Contains("kept (the checkpoint's quark): 4") && Catch::Contains("requantized (decoded, then the online method): 2"));
    CHECK_THAT(err, Catch::Contains("would not requantize ['model.layers.0.self_attn.o_proj', 'model.layers.1.self_attn.o_proj']"));
    check_second_conversion(first, second, attention_modules({"o_proj"}), formula::fp8_per_channel_static, formula::fp8_per_channel_static);
    const auto again = plan_of(second);
    CHECK(again.status == 0);
  }

  SECTION("a conversion the Quark config cannot hold is refused, and nothing is written") {
    refused({"quantize", "-c", R"({"linear": "fp8_per_channel", "ignore": ["re:.*qkv_proj"]})", "--format", "compressed-tensors"}, first,
            tmp.path() / "refused", "which quantize keeps in the Quark config it came from");
  }
}

TEST_CASE("a ModelOpt MIXED_PRECISION checkpoint quantize wrote is planned and converted again", "[checkpoint][quantize][requantize][read-back]") {
  const qpolicy::test::temp_dir tmp("read-back-modelopt");
  const auto bf16 = bf16_dir(tmp.path());
  const auto modelopt = modelopt_nvfp4_dir(bf16, tmp.path());

  SECTION("MXFP8 attention: vLLM 0.34 requantizes it (ModelOptLinearMethod decodes MXFP8); the experts are kept") {
    const auto first = tmp.path() / "first";
    const std::string config = R"({"linear": "mxfp8"})";
    ok({"quantize", "-c", config, modelopt.string(), "-o", first.string()});
    const auto r = plan_of(first, config);
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("kept (the checkpoint's modelopt_mixed): 2") &&
                          Catch::Contains("requantized (decoded, then the online method): 4"));
    CHECK_THAT(r.out, Catch::Contains("quantized_layers 'model.layers.0.self_attn.q_proj' (quant_algo 'MXFP8')"));
    const auto second = tmp.path() / "second";
    const auto err = ok({"quantize", "-c", config, first.string(), "-o", second.string()});
    CHECK_THAT(err, !Catch::Contains("would not requantize"));
    check_second_conversion(first, second, attention_modules({"q_proj", "k_proj", "v_proj", "o_proj"}), formula::mxfp8_torch, formula::mxfp8_torch);
  }

  SECTION("FP8 blocks: vLLM 0.34 refuses to requantize them; kept where the online config leaves them, decoded as an extension elsewhere") {
    const auto first = tmp.path() / "first";
    ok({"quantize", "-c", R"({"linear": "fp8_per_block"})", modelopt.string(), "-o", first.string()});
    CHECK(plan_of(first).status == 0);
    const auto r = plan_of(first, R"({"linear": "fp8_per_block"})");
    CHECK(r.status == 2);
    CHECK(first_line(r.err) == "error: ModelOpt weight dequantization is only supported for MXFP8.");
    const auto second = tmp.path() / "second";
    const auto err = ok({"quantize", "-c", R"({"linear": "fp8_per_block", "ignore": ["re:.*o_proj"]})", first.string(), "-o", second.string()});
    CHECK_THAT(err, Catch::Contains("kept (the checkpoint's modelopt_mixed): 4") && Catch::Contains("requantized (decoded, then the online method): 2"));
    check_second_conversion(first, second, attention_modules({"q_proj", "k_proj", "v_proj"}), formula::fp8_per_block_static,
                            formula::fp8_per_block_static);
  }
}
