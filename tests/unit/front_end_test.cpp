// The JSON front end: every real model plans, every field error is collected, bad model files get clear errors.
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "../support/test_inputs.hpp"
#include "qpolicy/io/json_front.hpp"

using namespace qpolicy;
namespace fs = std::filesystem;

namespace {
std::string env(const char* n) { return test::required_env(n); }
using test::slurp;
std::string resolve_error(const char* q, const char* cfg, bool legacy = false, vllm_release release = newest_release) {
  config_request r;
  if (q) r.quantization = q;
  if (cfg) r.config_text = cfg;
  r.legacy = legacy;
  r.release = release;
  try {
    resolve(r);
  } catch (const config_error& e) {
    return e.diag().text();
  }
  return "<no error>";
}
}  // namespace

TEST_CASE("messages print JSON values as Python does", "[unit][front]") {
  // 0.30-0.33 print a targets value that is not a shorthand with str().
  const auto v033 = vllm_release::v0_33;
  CHECK(resolve_error(nullptr, R"({"targets":{"x":100.0}})", false, v033).find("= 100.0 is not") != std::string::npos);
  CHECK(resolve_error(nullptr, R"({"targets":{"x":1e16}})", false, v033).find("= 1e+16 is not") != std::string::npos);
  CHECK(resolve_error(nullptr, R"({"targets":{"x":0.00001}})", false, v033).find("= 1e-05 is not") != std::string::npos);
  CHECK(resolve_error(nullptr, R"({"targets":{"x":[1,"a",null,true]}})", false, v033).find("= [1, 'a', None, True] is not") !=
        std::string::npos);
  CHECK(resolve_error(nullptr, R"({"targets":{"x":{"k":"it's"}}})", false, v033).find("= {'k': \"it's\"} is not") !=
        std::string::npos);
  // 0.34 takes spec objects there, and names the type of anything else.
  CHECK(resolve_error(nullptr, R"({"targets":{"x":100.0}})") ==
        "targets: targets[x] must be an online shorthand name or a quantization spec, got float");
  CHECK(resolve_error(nullptr, R"({"targets":{"x":{"k":"it's"}}})") == "targets.k: Unexpected keyword argument");
  CHECK(resolve_error(nullptr, R"({"ignore":"x","targets":5})") == "targets must be a dict, got int");
  CHECK(resolve_error(nullptr, R"({"linear":{"weight":"x","bogus":1}})").rfind("linear.weight: unknown quantization name 'x'", 0) == 0);
  CHECK(resolve_error(nullptr, "[1]") == "quantization_config must be a JSON object or null, got list");
  CHECK(resolve_error("fp8_per_tensor", R"({"global_scheme":true})", true) ==
        "quantization='fp8_per_tensor' conflicts with quantization_config['global_scheme']=True. These must match when both are specified.");
}

TEST_CASE("hadamard_size is read as pydantic reads an int (vLLM 0.34)", "[unit][front]") {
  auto spec = [](const char* size) {
    return resolve_error(nullptr, (std::string(R"({"linear":{"weight":"mxfp4","hadamard_size":)") + size + "}}").c_str());
  };
  CHECK(spec("32") == "<no error>");
  CHECK(spec("\"32\"") == "<no error>");
  CHECK(spec("\" 3_2 \"") == "<no error>");
  CHECK(spec("32.0") == "<no error>");
  CHECK(spec("true") == "<no error>");  // a bool is an int: 1, a power of two
  CHECK(spec("false") == "linear.hadamard_size: hadamard_size must be a power of two, got 0");
  CHECK(spec("1e2") == "linear.hadamard_size: hadamard_size must be a power of two, got 100");
  CHECK(spec("\"-32\"") == "linear.hadamard_size: hadamard_size must be a power of two, got -32");
  CHECK(spec("32.5") == "linear.hadamard_size: Input should be a valid integer, got a number with a fractional part");
  CHECK(spec("1e400") == "linear.hadamard_size: Input should be a finite number");
  CHECK(spec("\"0x20\"") == "linear.hadamard_size: Input should be a valid integer, unable to parse string as an integer");
  CHECK(spec("[32]") == "linear.hadamard_size: Input should be a valid integer");
  CHECK(spec("9223372036854775808") ==
        "linear.hadamard_size: hadamard_size 9223372036854775808 is larger than qpolicy supports (at most 4611686018427387904)");
  // Before 0.34 QuantSpec has no such field.
  CHECK(resolve_error(nullptr, R"({"linear":{"weight":"mxfp4","hadamard_size":32}})", false, vllm_release::v0_33) ==
        "linear.hadamard_size: Unexpected keyword argument");
}

TEST_CASE("a spec-valued target prints as the QuantSpec dataclass in the exclusion message", "[unit][front]") {
  CHECK(resolve_error(nullptr, R"({"targets":{"x":{"weight":"mxfp4"}},"linear":{"weight":"mxfp4","hadamard_size":true}})") ==
        "quantization_config.targets is mutually exclusive with quantization_config.linear/moe, got targets={'x': "
        "QuantSpec(weight=QuantKey(dtype=torch.uint8, scale=ScaleDesc(dtype=torch.uint8, static=True, "
        "group_shape=GroupShape(row=1, col=32)), scale2=None, symmetric=True), activation=None, hadamard_size=None)}, "
        "linear=mxfp4_hadamard1, moe=None.");
}

TEST_CASE("every field error is collected, in declaration order", "[unit][front]") {
  config_request r;
  r.config_text = R"({"zzz":1,"ignore":[1,"a",2],"linear":{"weight":"bad","extra":0},"moe":5})";
  try {
    resolve(r);
    FAIL("no error");
  } catch (const config_errors& e) {
    std::vector<std::string> got;
    for (const auto& d : e.all()) got.push_back(d.text());
    CHECK(got == std::vector<std::string>{
                     "linear.weight: unknown quantization name 'bad'; expected one of ['fp8_per_block_dynamic', "
                     "'fp8_per_block_static', 'fp8_per_channel_static', 'fp8_per_tensor_dynamic', "
                     "'fp8_per_tensor_static', 'fp8_per_token', 'int4_per_group_32', 'int8_per_channel_static', "
                     "'int8_per_group_32', 'lut_b', 'mxfp4', 'mxfp8', 'nvfp4_per_token']",
                     "linear.extra: Unexpected keyword argument", "moe: Input should be a dictionary or an instance of QuantSpec",
                     "ignore.0: Input should be a valid string", "ignore.2: Input should be a valid string",
                     "zzz: Unexpected keyword argument"});
  }
}

TEST_CASE("duplicate keys: the last value wins at the first position, with a warning", "[unit][front]") {
  config_request r;
  r.quantization = "online";
  r.config_text = R"({"linear":"fp8_per_tensor","moe":"fp8_per_block","linear":"fp8_per_block"})";
  const auto res = resolve(r);
  CHECK(resolved_to_json(res.config) ==
        R"({"linear":{"weight":"fp8_per_block_static"},"moe":{"weight":"fp8_per_block_static"},"ignore":[],"targets":null})");
  REQUIRE(res.warnings.size() == 1);
  CHECK(res.warnings[0].find("duplicate key 'linear'") != std::string::npos);
}

TEST_CASE("every real model plans under both shorthands, ignore and targets", "[unit][front]") {
  const fs::path models = env("QPOLICY_MODELS");
  std::size_t seen = 0;
  for (const auto& f : fs::directory_iterator(models)) {
    if (f.path().extension() != ".json") continue;
    ++seen;
    const auto model = parse_model(slurp(f.path()));
    INFO(f.path().filename());
    for (const char* q : {"fp8_per_block", "fp8_per_tensor"}) {
      config_request r;
      r.quantization = q;
      const auto p = make_plan(resolve(r).config, model);
      CHECK(p.first_error() == nullptr);
      CHECK(p.count(method::fp8_per_block) + p.count(method::fp8_per_tensor) > 0);
      r.config_text = R"({"ignore":["lm_head","re:.*\\.layers\\.0\\.","*mlp.gate"]})";
      const auto ignored = make_plan(resolve(r).config, model);
      CHECK(ignored.first_error() == nullptr);
      CHECK(ignored.count(method::unquantized) > 0);
    }
    config_request t;
    t.config_text = R"({"targets":{"re:.*experts$":"fp8_per_block","re:.*(o_proj|down_proj)$":"fp8_per_tensor"}})";
    const auto targeted = make_plan(resolve(t).config, model);
    CHECK(targeted.first_error() == nullptr);
    CHECK(targeted.count(method::fp8_per_tensor) > 0);
  }
  CHECK(seen >= 5);
}

TEST_CASE("plan warns about patterns that matched nothing", "[unit][front]") {
  const auto model = parse_model(R"({"layers":[{"name":"a.q","class":"RowParallelLinear","kind":"linear"},
                                    {"name":"lm_head","class":"ParallelLMHead","kind":"other"}]})");
  config_request r;
  r.quantization = "fp8_per_tensor";
  r.config_text = R"({"ignore":["re:.*visual.*","lm_head","a.q"]})";
  const auto p = make_plan(resolve(r).config, model);
  CHECK(p.warnings == std::vector<std::string>{"ignore pattern 're:.*visual.*' matched no layer",
                                               "ignore pattern 'lm_head' matched only layers online quantization does not handle"});
}

TEST_CASE("model files: strict fields, clear errors", "[unit][front]") {
  auto model_error = [](const std::string& text) {
    try {
      parse_model(text);
    } catch (const config_error& e) {
      return e.diag().text();
    }
    return std::string("<no error>");
  };
  CHECK(model_error(R"({"layers":[{"name":"a","class":"C","kind":"linear","shpae":[1,2]}]})") ==
        "layers.0.shpae: unknown field 'shpae'; a layer has name, class, kind, quantizable, shape, shard_sizes, "
        "num_experts, hidden_size, intermediate_size, bias in the model file");
  CHECK(model_error(R"({"layers":[{"name":"a","class":"C","kind":"conv"}]})") ==
        "layers.0.kind: unknown layer kind 'conv'; expected one of 'linear', 'moe', 'other' in the model file");
  CHECK(model_error(R"({"layers":[{"name":"a","class":"C","kind":"other"},{"name":"a","class":"C","kind":"other"}]})") ==
        "layers.1.name: duplicate layer name 'a' (first at layers.0) in the model file");
  CHECK(model_error(R"({"layers":[{"name":"","class":"C","kind":"other"}]})") == "layers.0.name: layer name is empty in the model file");
  CHECK(model_error(R"({"layers":[{"name":"a","class":"C","kind":"linear","shape":[0,5]}]})").find("expected a positive integer") != std::string::npos);
  CHECK(model_error(R"({"layers":[{"name":"a","kind":"other"}]})") == "layers.0: layer 'a' has no \"class\" in the model file");
  CHECK(model_error(R"({"layerz":[]})").find("unknown field 'layerz'") != std::string::npos);
  CHECK(model_error("{\"layers\":[{\"name\":\"a\xff\",\"class\":\"C\",\"kind\":\"other\"}]}").find("invalid JSON in the model file at line 1, column") == 0);
  CHECK(model_error("{\"layers\": [\n  {\"name\": \"a\",}\n  oops]}") .find("line 3, column 3") != std::string::npos);
  CHECK(model_error(std::string(100, '[') + std::string(100, ']')).find("nested more than 64 levels deep") != std::string::npos);
  CHECK(model_error(R"({"layers":[{"name":"a","class":"C","kind":"other","name":"b"}]})").find("duplicate key 'name'") != std::string::npos);
}

TEST_CASE("a 100k-layer model file plans quickly", "[unit][front]") {
  std::string text = R"({"packed_modules_mapping":{"qkv_proj":["q_proj","k_proj","v_proj"]},"layers":[)";
  for (int i = 0; i < 100000; ++i) {
    if (i) text += ',';
    text += R"({"name":"model.layers.)" + std::to_string(i / 4) + (i % 4 == 0 ? ".self_attn.qkv_proj" : i % 4 == 1 ? ".self_attn.o_proj" : i % 4 == 2 ? ".mlp.experts" : ".mlp.gate") +
            R"(","class":"X","kind":")" + (i % 4 == 2 ? "moe" : "linear") + "\"" + (i % 4 == 3 ? R"(,"quantizable":false)" : "") + "}";
  }
  text += "]}";
  const auto start = std::chrono::steady_clock::now();
  const auto model = parse_model(text);
  config_request r;
  r.quantization = "fp8_per_block";
  r.config_text = R"({"ignore":["re:model\\.layers\\.1\\d*\\.","*.q_proj"]})";
  const auto p = make_plan(resolve(r).config, model);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(model.layers.size() == 100000);
  CHECK(p.first_error() != nullptr);  // q_proj alone: the shards disagree
  CHECK(seconds < 5.0);
}
