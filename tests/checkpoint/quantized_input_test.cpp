// `qpolicy quantize` on an already-quantized model directory: kept layers copied byte for byte (fp8's
// block scales renamed to compressed-tensors' name), requantized layers decoded from the checkpoint's
// format (checked against a decode written from the formats, NVFP4's global scale inverted as vLLM inverts it) and quantized with the online
// formula, online layers as from a bf16 model; one compressed-tensors quantization_config keeping the
// checkpoint's groups; the releases' refusals and every bad input refused with nothing written.
// (tests/witness_hf/check_quantized_inputs.py checks the bits against torch and compressed-tensors.)
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "../support/checkpoint_fixture.hpp"
#include "../support/quantized_dirs.hpp"
#include "../support/files.hpp"
#include "../support/process.hpp"
#include "../support/reference_decode.hpp"
#include "../support/temp_dir.hpp"
#include "../support/test_inputs.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/io/safetensors.hpp"

namespace st = qpolicy::safetensors;
namespace fs = std::filesystem;
namespace json = boost::json;
using qpolicy::schemes::formula;

using namespace qpolicy::test::quantized_dirs;
using qpolicy::test::listing;

TEST_CASE("quantize on NVFP4 experts keeps them, or requantizes them as vLLM decodes them", "[checkpoint][quantize][requantize]") {
  const qpolicy::test::temp_dir tmp("quantized-input-nvfp4");
  const auto bf16 = bf16_dir(tmp.path());
  const auto nvfp4 = quantized_input(bf16, tmp.path(), "nvfp4", R"({"moe": "nvfp4_per_token"})");
  const auto in = tensors_of(nvfp4);

  SECTION("kept experts stay byte for byte; the attention goes online as from the bf16 model") {
    const auto out = tmp.path() / "mixed";
    const auto [err, got, want] = convert_beside_bf16(nvfp4, bf16, out, tmp.path() / "direct", R"({"linear": "fp8_per_block"})");
    CHECK_THAT(err, Catch::Contains("kept (the checkpoint's compressed-tensors): 2") && Catch::Contains("quantized online: 4"));
    std::size_t kept = 0, online = 0;
    for (const auto& [name, t] : got) {
      if (name.find(".experts.") != std::string::npos) {
        REQUIRE(in.count(name));
        CHECK(t.bytes == in.at(name).bytes);
        ++kept;
      } else {
        REQUIRE(want.count(name));
        CHECK(t.bytes == want.at(name).bytes);
        online += name.find("_proj.") != std::string::npos;
      }
    }
    CHECK(kept == 2 * 4 * 3 * 3);  // 2 layers, 4 experts, 3 projections: weight_packed, weight_scale, weight_global_scale
    CHECK(online == 2 * 4 * 2);    // q/k/v/o of 2 layers: codes and scales
    CHECK(got.size() == in.size() + 8);  // every input tensor, and a scale beside each attention weight
    const auto qc = quantization_config(out);
    const auto& groups = qc.at("config_groups").as_object();
    REQUIRE(groups.size() == 2);
    CHECK(groups.at("group_0").at("format") == "nvfp4-pack-quantized");
    CHECK(groups.at("group_0").at("targets").as_array().size() == 2);  // the two kept MoE layers' experts
    CHECK(groups.at("online_group_0").at("format") == "float-quantized");
    CHECK(groups.at("online_group_0").at("targets").as_array().size() == 8);
    CHECK(qc.at("format") == "mixed-precision");
    CHECK(qc.at("ignore") == json::array{"model.layers.0.mlp.gate", "model.layers.1.mlp.gate", "lm_head"});
    const auto plan = json::parse(qpolicy::test::slurp(out / "qpolicy_plan.json")).as_object();
    CHECK(plan.at("layers").as_array()[4].at("composition") == "kept");
  }

  SECTION("requantized experts: vLLM's NVFP4 decode (1 / global scale) to bf16, then the online formula") {
    const auto out = tmp.path() / "requantized";
    const auto err = ok({"quantize", "-c", R"({"moe": "fp8_per_block"})", nvfp4.string(), "-o", out.string()});
    CHECK_THAT(err, Catch::Contains("requantized (decoded, then the online method): 2") &&
                        Catch::Contains("24 decoded from the checkpoint's format first, 48 of their stored tensors dropped"));
    const auto got = tensors_of(out);
    for (int l = 0; l < 2; ++l)
      for (int e = 0; e < 4; ++e)
        for (const char* p : {"gate_proj", "up_proj", "down_proj"}) {
          const auto m = "model.layers." + std::to_string(l) + ".mlp.experts." + std::to_string(e) + "." + p;
          INFO(m);
          CHECK(!got.count(m + ".weight_packed"));
          CHECK(!got.count(m + ".weight_global_scale"));
          const auto& packed = in.at(m + ".weight_packed");
          const float second = 1.0f / values<float>(in.at(m + ".weight_global_scale").bytes).at(0);
          const auto [codes, scales] = requantized(formula::nvfp4_weight, in, m + ".weight_packed", m + ".weight_scale", &second,
                                                   packed.shape[0], packed.shape[1] * 2, formula::fp8_per_block_static);
          REQUIRE(got.count(m + ".weight"));
          CHECK(got.at(m + ".weight").type == st::dtype::F8_E4M3);
          CHECK(got.at(m + ".weight").bytes == codes);
          CHECK(got.at(m + ".weight_scale").bytes == scales);
        }
    const auto qc = quantization_config(out);
    CHECK(qc.at("config_groups").as_object().size() == 1);
    CHECK(qc.at("format") == "float-quantized");
  }

  SECTION("the releases' refusals, and the quantization argument checked as vLLM checks it; nothing is written") {
    auto refused = [&](std::vector<std::string> args, const std::string& message) {
      ::refused(std::move(args), nvfp4, tmp.path() / "refused", message);
    };
    refused({"quantize", "-c", R"({"moe": "fp8_per_block"})", "--vllm", "0.32"}, "Requantizing checkpoint-quantized MoE layers is not supported.");
    refused({"quantize", "-c", R"({"moe": "fp8_per_block"})", "--vllm", "0.31"}, "to pre-quantized layer model.layers.0.mlp.experts");
    refused({"quantize", "-q", "fp8_per_block"}, "Quantization method specified in the model config (compressed-tensors) does not match");
    refused({"quantize", "-c", R"({"moe": "fp8_per_block"})", "--format", "vllm-fp8"}, "--format vllm-fp8 cannot express an already-quantized");
  }
}

TEST_CASE("quantize on vLLM fp8 blocks renames kept scales and decodes the rest as a named extension", "[checkpoint][quantize][requantize]") {
  const qpolicy::test::temp_dir tmp("quantized-input-fp8");
  const auto bf16 = bf16_dir(tmp.path());
  const auto fp8 = quantized_input(bf16, tmp.path(), "fp8", R"({"linear": "fp8_per_block", "moe": "fp8_per_block"})");
  const auto in = tensors_of(fp8);
  const auto out = tmp.path() / "mx";
  const auto err = ok({"quantize", "-c", R"({"linear": "mxfp8"})", fp8.string(), "-o", out.string()});
  CHECK_THAT(err, Catch::Contains("vLLM 0.34 would not requantize ['model.layers.0.self_attn.qkv_proj'") &&
                      Catch::Contains("qpolicy decodes fp8, 128x128 blocks itself (an extension)") &&
                      Catch::Contains("renamed weight_scale_inv -> weight_scale"));
  const auto got = tensors_of(out);
  // Kept experts: the same bytes, the block scale under compressed-tensors' name.
  const std::string e = "model.layers.1.mlp.experts.3.down_proj";
  CHECK(got.at(e + ".weight").bytes == in.at(e + ".weight").bytes);
  CHECK(got.at(e + ".weight_scale").bytes == in.at(e + ".weight_scale_inv").bytes);
  CHECK(!got.count(e + ".weight_scale_inv"));
  // Requantized attention: FP8 blocks decoded, MXFP8 from the decode.
  const std::string q = "model.layers.0.self_attn.k_proj";
  const auto& codes = in.at(q + ".weight");
  const auto [want_codes, want_scales] = requantized(formula::fp8_per_block_static, in, q + ".weight", q + ".weight_scale_inv", nullptr,
                                                     codes.shape[0], codes.shape[1], formula::mxfp8_torch);
  CHECK(got.at(q + ".weight").bytes == want_codes);
  CHECK(got.at(q + ".weight_scale").bytes == want_scales);
  CHECK(got.at(q + ".weight_scale").type == st::dtype::U8);
  CHECK(!got.count(q + ".weight_scale_inv"));
  const auto qc = quantization_config(out);
  const auto& kept = qc.at("config_groups").at("group_0");
  CHECK(kept.at("weights").at("strategy") == "block");
  CHECK(kept.at("weights").at("block_structure") == json::array{128, 128});
  CHECK(kept.at("input_activations").at("strategy") == "group");
  CHECK(kept.at("input_activations").at("group_size") == 128);
  CHECK(qc.at("config_groups").at("online_group_0").at("format") == "mxfp8-quantized");
  CHECK(qc.at("format") == "mixed-precision");
  // The plan marks the layers qpolicy decoded itself, with the error the release gives at load time.
  const auto plan = json::parse(qpolicy::test::slurp(out / "qpolicy_plan.json")).as_object();
  int extensions = 0;
  for (const auto& l : plan.at("layers").as_array()) {
    const auto& layer = l.as_object();
    const bool attention = layer.at("name").as_string().ends_with("_proj") && layer.at("name").as_string().find("self_attn") != std::string::npos;
    INFO(layer.at("name").as_string());
    CHECK(layer.contains("extension") == attention);
    if (!layer.contains("extension")) continue;
    CHECK(layer.at("composition") == "requantized");
    CHECK(layer.at("extension").at("decoded_by") == "qpolicy");
    CHECK_THAT(std::string(layer.at("extension").at("vllm_load_error").as_string()), Catch::Contains("dequantize_weight"));
    ++extensions;
  }
  CHECK(extensions == 4);  // qkv_proj and o_proj of both layers

  // Several processes, and a resumed run, write the same directory.
  const auto sharded = tmp.path() / "sharded";
  for (const char* shard : {"0/2", "1/2"})
    ok({"quantize", "-c", R"({"linear": "mxfp8"})", fp8.string(), "-o", sharded.string(), "--max-shard-size", "200KB", "--shard", shard});
  const auto whole = tmp.path() / "whole";
  ok({"quantize", "-c", R"({"linear": "mxfp8"})", fp8.string(), "-o", whole.string(), "--max-shard-size", "200KB"});
  CHECK(qpolicy::test::tree(sharded) == qpolicy::test::tree(whole));

  // A run stopped after its shards (a file size limit the copied tokenizer exceeds) resumes to the
  // directory a run that never failed writes.
  qpolicy::test::spit(fp8 / "tokenizer.json", std::string(4 << 20, 'x'));
  const auto stopped = tmp.path() / "stopped", fresh = tmp.path() / "fresh";
  const auto r = qpolicy::test::run_process({"/bin/sh", "-c", "ulimit -f 4096 && exec \"$@\"", "sh", qpolicy::test::required_env("QPOLICY_EXE"),
                                             "quantize", "-c", R"({"linear": "mxfp8"})", "--max-shard-size", "200KB", fp8.string(), "-o",
                                             stopped.string()});
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Catch::Contains("--resume finishes it"));
  const auto resumed = ok({"quantize", "-c", R"({"linear": "mxfp8"})", "--max-shard-size", "200KB", "--resume", fp8.string(), "-o",
                           stopped.string()});
  CHECK_THAT(resumed, Catch::Contains("finished"));
  ok({"quantize", "-c", R"({"linear": "mxfp8"})", "--max-shard-size", "200KB", fp8.string(), "-o", fresh.string()});
  CHECK(qpolicy::test::tree(stopped) == qpolicy::test::tree(fresh));
}

TEST_CASE("quantize on INT8 pack-quantized experts decodes their int32 words and bf16 row scales, then the online formula",
          "[checkpoint][quantize][requantize]") {
  const qpolicy::test::temp_dir tmp("quantized-input-int8");
  const auto bf16 = bf16_dir(tmp.path());
  const auto int8 = quantized_input(bf16, tmp.path(), "int8", R"({"moe": "int8_per_channel_weight_only"})");
  const auto in = tensors_of(int8);
  const auto out = tmp.path() / "fp8";
  const auto err = ok({"quantize", "-c", R"({"moe": "fp8_per_block"})", int8.string(), "-o", out.string()});
  CHECK_THAT(err, Catch::Contains("requantized (decoded, then the online method): 2"));
  const auto got = tensors_of(out);
  int checked = 0;
  for (const auto& [name, t] : in) {
    if (!name.ends_with(".weight_packed")) continue;
    const auto m = name.substr(0, name.size() - 14);
    INFO(m);
    // The decode written here: byte k of row r's little-endian int32 words is code + 128, times the
    // row's bf16 scale in float32, rounded to bf16.
    REQUIRE(t.type == st::dtype::I32);
    const auto scales = values<std::uint16_t>(in.at(m + ".weight_scale").bytes);
    const auto rows = t.shape[0], words = t.shape[1] * 4;
    const auto shape = values<std::int64_t>(in.at(m + ".weight_shape").bytes);
    REQUIRE(shape.size() == 2);
    const auto cols = shape[1];
    std::vector<std::uint16_t> w(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t k = 0; k < cols; ++k) {
        const int code = static_cast<std::uint8_t>(t.bytes[static_cast<std::size_t>(r * words + k)]) - 128;
        w[static_cast<std::size_t>(r * cols + k)] =
            qpolicy::test::bf16_of(static_cast<float>(code) * qpolicy::fp8::from_bf16(scales[static_cast<std::size_t>(r)]));
      }
    const auto parts = qpolicy::quantize_tensor_parts(formula::fp8_per_block_static, {w.data(), qpolicy::element::bf16, rows, cols}, {});
    REQUIRE(got.count(m + ".weight"));
    CHECK(got.at(m + ".weight").bytes == std::string(parts[0].bytes.begin(), parts[0].bytes.end()));
    CHECK(got.at(m + ".weight_scale").bytes == std::string(parts[1].bytes.begin(), parts[1].bytes.end()));
    CHECK(!got.count(m + ".weight_packed"));
    CHECK(!got.count(m + ".weight_shape"));
    ++checked;
  }
  CHECK(checked == 2 * 4 * 3);
}

TEST_CASE("quantize refuses a quantized checkpoint whose tensors are not what its format says, naming the tensor",
          "[checkpoint][quantize][requantize]") {
  const qpolicy::test::temp_dir tmp("quantized-input-bad");
  const auto bf16 = bf16_dir(tmp.path());
  const auto nvfp4 = quantized_input(bf16, tmp.path(), "nvfp4", R"({"moe": "nvfp4_per_token"})");
  const auto in = tensors_of(nvfp4);
  const auto config = qpolicy::test::slurp(nvfp4 / "config.json");
  // A copy of the checkpoint with its tensors changed by `change` (name -> spec, or erased) and its config by `edit`.
  auto variant = [&](const std::string& name, auto&& change, const std::string& new_config = "") {
    return write_dir(tmp.path() / name, in, change, new_config.empty() ? config : new_config);
  };
  const std::string scale = "model.layers.1.mlp.experts.2.up_proj.weight_scale";
  auto refused = [&](const fs::path& d, const std::string& message) {
    const auto out = tmp.path() / "out";
    for (const char* c : {R"({"moe": "fp8_per_block"})", R"({"linear": "fp8_per_block"})"}) {
      const auto r = run({"quantize", "-c", c, d.string(), "-o", out.string()});
      INFO(c << "\n" << r.err);
      CHECK(r.status == 2);
      CHECK_THAT(r.err, Catch::Contains(message));
      CHECK(!fs::exists(out));
    }
  };
  refused(variant("missing-scale", [&](st::tensor_spec& s, std::string&) { return s.name != scale; }),
          "tensor '" + scale + "' is missing");
  refused(variant("scale-shape",
                  [&](st::tensor_spec& s, std::string& bytes) {
                    if (s.name == scale) s.shape[1] /= 2, bytes.resize(bytes.size() / 2);
                    return true;
                  }),
          "tensor '" + scale + "' is F8_E4M3 [128, 8], expected [128, 16]");
  // The config says MXFP4 where the tensors are NVFP4 (an e4m3 scale per 16 and a global scale).
  auto mxfp4_config = config;
  const auto at = mxfp4_config.find("nvfp4-pack-quantized");
  REQUIRE(at != std::string::npos);
  mxfp4_config.replace(at, std::string("nvfp4-pack-quantized").size(), "mxfp4-pack-quantized");
  refused(variant("says-mxfp4", [](st::tensor_spec&, std::string&) { return true; }, mxfp4_config),
          "stores model.layers.0.mlp.experts.0.gate_proj as weight_packed U8 [N, K/2], weight_scale U8 [N, K/32]; tensor "
          "'model.layers.0.mlp.experts.0.gate_proj.weight_scale' is F8_E4M3 [128, 16]");
  refused(variant("gptq", [](st::tensor_spec&, std::string&) { return true; }, R"({"quantization_config": {"quant_method": "gptq"}})"),
          "quant_method 'gptq', which this build does not read");
  CHECK(listing(tmp.path()) == std::vector<std::string>{"bf16", "gptq", "missing-scale", "nvfp4", "says-mxfp4", "scale-shape"});
}

TEST_CASE("quantize on gpt-oss keeps its fused MXFP4 experts in a Quark checkpoint beside online FP8 attention",
          "[checkpoint][quantize][requantize]") {
  const qpolicy::test::temp_dir tmp("quantized-input-gpt-oss");
  const auto oss = gpt_oss_dir(tmp.path());
  const auto in = tensors_of(oss);

  SECTION("experts byte for byte, attention as quantize-tensor gives it, one Quark quantization_config") {
    const auto out = tmp.path() / "out";
    const auto err = ok({"quantize", "-c", R"({"linear": "fp8_per_channel"})", oss.string(), "-o", out.string()});
    CHECK_THAT(err, Catch::Contains("quant_method quark"));
    const auto got = tensors_of(out);
    CHECK(got.size() == in.size() + 8);  // a scale beside each of the 8 attention weights
    for (const auto& [name, t] : in) {
      INFO(name);
      REQUIRE(got.count(name));
      if (name.find("self_attn") == std::string::npos) {
        CHECK(got.at(name).bytes == t.bytes);
        continue;
      }
      std::vector<std::uint16_t> x(t.bytes.size() / 2);
      std::memcpy(x.data(), t.bytes.data(), t.bytes.size());
      const auto parts = qpolicy::quantize_tensor_parts(formula::fp8_per_channel_static, {x.data(), qpolicy::element::bf16, t.shape[0], t.shape[1]}, {});
      const auto scale = name.substr(0, name.size() - 7) + ".weight_scale";
      CHECK(got.at(name).type == st::dtype::F8_E4M3);
      CHECK(got.at(name).bytes == std::string(parts[0].bytes.begin(), parts[0].bytes.end()));
      REQUIRE(got.count(scale));
      CHECK(got.at(scale).shape == std::vector<std::int64_t>{t.shape[0]});  // Quark's [N], not compressed-tensors' [N, 1]
      CHECK(got.at(scale).bytes == std::string(parts[1].bytes.begin(), parts[1].bytes.end()));
    }
    const auto qc = quantization_config(out);
    CHECK(qc.at("quant_method") == "quark");
    CHECK(qc.at("exclude") == json::array{"model.layers.0.mlp.router", "model.layers.1.mlp.router", "lm_head"});
    CHECK(qc.at("global_quant_config").at("weight").is_null());
    const auto& layers = qc.at("layer_quant_config").as_object();
    CHECK(layers.size() == 2 + 8);
    const auto& experts = layers.at("model.layers.1.mlp.experts").as_object();
    CHECK(experts.at("input_tensors").is_null());
    CHECK(experts.at("weight").at("dtype") == "fp4");
    CHECK(experts.at("weight").at("qscheme") == "per_group");
    CHECK(experts.at("weight").at("group_size") == 32);
    CHECK(experts.at("weight").at("scale_format") == "e8m0");
    const auto& k = layers.at("model.layers.0.self_attn.k_proj").as_object();
    CHECK(k.at("weight").at("qscheme") == "per_channel");
    CHECK(k.at("input_tensors").at("qscheme") == "per_channel");  // dynamic per-token (vLLM's kFp8DynamicTokenSym)
    CHECK(k.at("input_tensors").at("is_dynamic") == true);
  }

  SECTION("per-block and per-tensor layouts, as Quark spells them") {
    const auto out = tmp.path() / "blocks";
    ok({"quantize", "-c", R"({"linear": "fp8_per_block"})", oss.string(), "-o", out.string()});
    auto qc = quantization_config(out);
    const auto& q = qc.at("layer_quant_config").at("model.layers.0.self_attn.q_proj").as_object();
    CHECK(q.at("weight").at("qscheme") == "per_block");
    CHECK(q.at("weight").at("block_size") == json::array{128, 128});
    CHECK(q.at("input_tensors").at("qscheme") == "per_group");
    CHECK(q.at("input_tensors").at("group_size") == 128);
    CHECK(tensors_of(out).at("model.layers.0.self_attn.k_proj.weight_scale").shape == std::vector<std::int64_t>{1, 1});
    const auto tensor = tmp.path() / "tensor";
    ok({"quantize", "-c", R"({"linear": "fp8_per_tensor"})", oss.string(), "-o", tensor.string()});
    qc = quantization_config(tensor);
    const auto& o = qc.at("layer_quant_config").at("model.layers.1.self_attn.o_proj").as_object();
    CHECK(o.at("weight").at("qscheme") == "per_tensor");
    CHECK(o.at("input_tensors").at("qscheme") == "per_tensor");
  }

  SECTION("what Quark's output cannot hold is refused, and nothing is written") {
    auto refused = [&](std::vector<std::string> args, const std::string& message) {
      ::refused(std::move(args), oss, tmp.path() / "refused", message);
    };
    refused({"quantize", "-c", R"({"linear": "fp8_per_block"})", "--format", "compressed-tensors"},
            "which a compressed-tensors checkpoint cannot hold byte for byte");
    refused({"quantize", "-c", R"({"linear": "mxfp8"})"}, "which the Quark checkpoint that keeps gpt-oss's MXFP4 experts does not hold");
  }
}

TEST_CASE("quantize on ModelOpt NVFP4 keeps its layers in a MIXED_PRECISION checkpoint beside online layers",
          "[checkpoint][quantize][requantize]") {
  const qpolicy::test::temp_dir tmp("quantized-input-modelopt");
  const auto bf16 = bf16_dir(tmp.path());
  const auto modelopt = modelopt_nvfp4_dir(bf16, tmp.path());
  const auto in = tensors_of(modelopt);

  SECTION("kept modules byte for byte, online ones as from the bf16 model, one MIXED_PRECISION config") {
    const auto out = tmp.path() / "mixed";
    const auto [err, got, want] = convert_beside_bf16(modelopt, bf16, out, tmp.path() / "direct", R"({"linear": "fp8_per_block"})");
    CHECK_THAT(err, Catch::Contains("MIXED_PRECISION") && Catch::Contains("format: modelopt"));
    for (const auto& [name, t] : got) {
      INFO(name);
      if (name.find("self_attn") == std::string::npos) {
        REQUIRE(in.count(name));
        CHECK(t.bytes == in.at(name).bytes);
        continue;
      }
      REQUIRE(want.count(name));
      CHECK(t.bytes == want.at(name).bytes);
      if (name.ends_with("weight_scale")) {  // ModelOpt's 4-D block grid
        const auto& grid = want.at(name).shape;
        CHECK(t.shape == std::vector<std::int64_t>{grid[0], 1, grid[1], 1});
      }
    }
    CHECK(got.size() == in.size() + 8);
    const auto qc = quantization_config(out);
    CHECK(qc.at("quant_method") == "modelopt");
    const auto& q = qc.at("quantization").as_object();
    CHECK(q.at("quant_algo") == "MIXED_PRECISION");
    CHECK(q.at("kv_cache_quant_algo") == "FP8");
    CHECK(q.at("exclude_modules") == json::array{"model.layers.0.mlp.gate", "model.layers.1.mlp.gate", "lm_head"});
    const auto& layers = q.at("quantized_layers").as_object();
    CHECK(layers.size() == 2 * 4 * 3 + 2 * 4);
    CHECK(layers.at("model.layers.1.mlp.experts.3.down_proj") == json::object{{"group_size", 16}, {"quant_algo", "NVFP4"}});
    CHECK(layers.at("model.layers.0.self_attn.k_proj") == json::object{{"quant_algo", "FP8_PB_WO"}});
  }

  SECTION("per-channel and MXFP8 layers, as ModelOpt spells them") {
    const auto out = tmp.path() / "channel";
    ok({"quantize", "-c", R"({"linear": "fp8_per_channel"})", modelopt.string(), "-o", out.string()});
    CHECK(tensors_of(out).at("model.layers.0.self_attn.q_proj.weight_scale").shape == std::vector<std::int64_t>{256});
    CHECK(quantization_config(out).at("quantization").at("quantized_layers").at("model.layers.0.self_attn.o_proj") ==
          json::object{{"quant_algo", "FP8_PER_CHANNEL_PER_TOKEN"}});
    const auto mx = tmp.path() / "mxfp8";
    ok({"quantize", "-c", R"({"linear": "mxfp8"})", modelopt.string(), "-o", mx.string()});
    CHECK(quantization_config(mx).at("quantization").at("quantized_layers").at("model.layers.1.self_attn.v_proj") ==
          json::object{{"quant_algo", "MXFP8"}});
    CHECK(tensors_of(mx).at("model.layers.1.self_attn.v_proj.weight_scale").shape == std::vector<std::int64_t>{128, 8});
  }

  SECTION("what ModelOpt's output cannot hold is refused, and nothing is written") {
    auto refused = [&](std::vector<std::string> args, const std::string& message) {
      ::refused(std::move(args), modelopt, tmp.path() / "refused", message);
    };
    refused({"quantize", "-c", R"({"linear": "fp8_per_tensor"})"},
            "which the ModelOpt MIXED_PRECISION checkpoint that keeps the NVFP4 layers does not hold");
    refused({"quantize", "-c", R"({"linear": "fp8_per_block"})", "--format", "compressed-tensors"},
            "which a compressed-tensors checkpoint cannot hold byte for byte");
  }
}

TEST_CASE("quantize on a rotated MXFP4 checkpoint keeps its rotated layers and transform_config beside online ones",
          "[checkpoint][quantize][requantize]") {
  const qpolicy::test::temp_dir tmp("quantized-input-rotated");
  const auto bf16 = bf16_dir(tmp.path());
  // The attention rotated by Hadamard 32, then MXFP4 (compressed-tensors' transform_config).
  const auto rotated = quantized_input(bf16, tmp.path(), "rotated", R"({"linear": "mxfp4_hadamard32"})");
  const auto in = tensors_of(rotated);

  SECTION("kept layers and their transform weights byte for byte; the experts online as from the bf16 model") {
    const auto [err, got, want] = convert_beside_bf16(rotated, bf16, tmp.path() / "out", tmp.path() / "direct", R"({"moe": "fp8_per_block"})");
    CHECK_THAT(err, Catch::Contains("quantized online: 2"));
    std::size_t kept = 0, online = 0;
    for (const auto& [name, t] : got) {
      INFO(name);
      if (name.find(".experts.") != std::string::npos) {
        REQUIRE(want.count(name));
        CHECK(t.bytes == want.at(name).bytes);
        ++online;
      } else {
        REQUIRE(in.count(name));
        CHECK(t.bytes == in.at(name).bytes);
        kept += name.find("_input.weight") != std::string::npos;
      }
    }
    CHECK(online == 2 * 4 * 3 * 2);  // each expert projection's codes and scales
    CHECK(kept > 0);                 // the transform weights
    const auto qc = quantization_config(tmp.path() / "out");
    CHECK(qc.at("transform_config") == quantization_config(rotated).at("transform_config"));
    CHECK(qc.at("config_groups").as_object().size() == 2);
  }

  SECTION("requantizing a rotated layer is refused, and nothing is written") {
    refused({"quantize", "-c", R"({"linear": "fp8_per_block"})"}, rotated, tmp.path() / "refused",
            "but the checkpoint's compressed-tensors config has a transform_config");
  }
}
