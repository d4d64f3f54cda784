// The JSON front end and the CLI: every real model plans, bad input gets exit 2 and a clear message.
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../support/process.hpp"
#include "qpolicy/io/json_front.hpp"
#include "../support/temp_dir.hpp"

using namespace qpolicy;
namespace fs = std::filesystem;

namespace {
std::string env(const char* n) {
  const char* v = std::getenv(n);
  if (!v) FAIL(std::string(n) + " is not set (run through meson test)");
  return v;
}
std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
fs::path write_temp(const std::string& name, const std::string& text) {
  static const test::temp_dir dir("test");  // removed when the tests end
  const auto p = dir.path() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}
test::process_result cli(std::vector<std::string> args) {
  args.insert(args.begin(), env("QPOLICY_EXE"));
  return test::run_process(args);
}
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
std::string resolve_error(const char* q, const char* cfg, bool legacy = false) {
  config_request r;
  if (q) r.quantization = q;
  if (cfg) r.config_text = cfg;
  r.legacy = legacy;
  try {
    resolve(r);
  } catch (const config_error& e) {
    return e.diag().text();
  }
  return "<no error>";
}
}  // namespace

TEST_CASE("messages print JSON values as Python does", "[unit][front]") {
  CHECK(resolve_error(nullptr, R"({"targets":{"x":100.0}})").find("= 100.0 is not") != std::string::npos);
  CHECK(resolve_error(nullptr, R"({"targets":{"x":1e16}})").find("= 1e+16 is not") != std::string::npos);
  CHECK(resolve_error(nullptr, R"({"targets":{"x":0.00001}})").find("= 1e-05 is not") != std::string::npos);
  CHECK(resolve_error(nullptr, R"({"targets":{"x":[1,"a",null,true]}})").find("= [1, 'a', None, True] is not") != std::string::npos);
  CHECK(resolve_error(nullptr, R"({"targets":{"x":{"k":"it's"}}})").find("= {'k': \"it's\"} is not") != std::string::npos);
  CHECK(resolve_error(nullptr, R"({"ignore":"x","targets":5})") == "targets must be a dict, got int");
  CHECK(resolve_error(nullptr, R"({"linear":{"weight":"x","bogus":1}})").rfind("linear.weight: unknown quantization name 'x'", 0) == 0);
  CHECK(resolve_error(nullptr, "[1]") == "quantization_config must be a JSON object or null, got list");
  CHECK(resolve_error("fp8_per_tensor", R"({"global_scheme":true})", true) ==
        "quantization='fp8_per_tensor' conflicts with quantization_config['global_scheme']=True. These must match when both are specified.");
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
                     "'fp8_per_tensor_static', 'fp8_per_token', 'int8_per_channel_static', 'mxfp4', 'mxfp8']",
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

TEST_CASE("CLI: exit status and first stderr line", "[unit][cli]") {
  auto r = cli({"resolve", "-c", "{\"linear\": }"});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: invalid JSON in quantization_config at line 1, column 12: syntax error");
  r = cli({"resolve", "-c", "{\"linear\": \"fp8_per_block\", // comment\n}"});
  CHECK(r.status == 2);  // inline JSON is strict
  const auto file = write_temp("cfg.json", "{\n  // files may hold comments\n  \"linear\": \"fp8_per_block\",\n}\n");
  r = cli({"resolve", "-c", "@" + file.string()});
  CHECK(r.status == 0);
  CHECK(r.out == "{\"linear\":{\"weight\":\"fp8_per_block_static\"},\"moe\":null,\"ignore\":[],\"targets\":null}\n");
  r = cli({"resolve", "-c", "@/nonexistent/cfg.json"});
  CHECK(r.status == 1);
  CHECK(first_line(r.err) == "error: cannot read the quantization_config file '/nonexistent/cfg.json': No such file or directory");
  r = cli({"plan", "-q", "fp8_per_block"});
  CHECK(r.status == 1);
  CHECK(first_line(r.err) == "error: plan needs --model MODEL.json");
  r = cli({"frobnicate"});
  CHECK(r.status == 1);
  r = cli({"plan", "--model", "x.json", "--tp", "zero"});
  CHECK(first_line(r.err) == "error: --tp must be a positive integer, got 'zero'");
  const auto bad_model = write_temp("model.json", R"({"layers":[{"name":"a","class":"C","kind":"linear","extra":1}]})");
  r = cli({"plan", "-q", "fp8_per_block", "--model", bad_model.string()});
  CHECK(r.status == 2);
  CHECK(first_line(r.err).find("error: layers.0.extra: unknown field 'extra'") == 0);
  r = cli({"plan", "-q", "fp8_per_block", "-c", R"j({"ignore":["re:(?=x)"]})j", "--model", bad_model.string()});
  CHECK(r.status == 2);
  fs::remove(file);
  fs::remove(bad_model);
}

// Issue 14's "Messages": each fed through the CLI, message and exit status checked.
TEST_CASE("CLI: integers of any size print exactly, as Python's int", "[unit][cli]") {
  const std::string big = "18446744073709551616";  // 2^64: a double in Boost.JSON, an int in Python
  auto r = cli({"resolve", "-c", R"({"targets":{"x":)" + big + "}}"});
  CHECK(r.status == 2);
  CHECK(first_line(r.err).find("error: targets: targets[x] = 18446744073709551616 is not a valid online shorthand name") == 0);
  r = cli({"resolve", "-c", R"({"targets":{"x":[-123456789012345678901234567890, 1.5]}})"});
  CHECK(first_line(r.err).find("targets[x] = [-123456789012345678901234567890, 1.5] is not") != std::string::npos);
  r = cli({"resolve", "-c", R"({"linear":{"weight":)" + big + "}}"});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: expected str or QuantKey, got int");
  r = cli({"resolve", "-c", big});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: quantization_config must be a JSON object or null, got int");
  r = cli({"resolve", "--legacy", "-q", "fp8_per_tensor", "-c", R"({"global_scheme":99999999999999999999999})"});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: quantization='fp8_per_tensor' conflicts with "
                             "quantization_config['global_scheme']=99999999999999999999999. These must match when both are specified.");
  // A repeated key: the last value wins, and so does its type.
  r = cli({"resolve", "-c", R"({"targets":{"x":)" + big + R"(, "x": 1.5}})"});
  CHECK(first_line(r.err).find("targets[x] = 1.5 is not") != std::string::npos);
  // Python's int() refuses more than 4300 digits, and so its json.
  r = cli({"resolve", "-c", "{\"targets\":\n{\"x\":" + std::string(4301, '7') + "}}"});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: invalid JSON in quantization_config at line 2, column 6: Exceeds the limit (4300 digits) "
                             "for integer string conversion: value has 4301 digits; use sys.set_int_max_str_digits() to increase the limit");
  r = cli({"resolve", "-c", R"({"targets":{"x":)" + std::string(4300, '7') + "}}"});
  CHECK(first_line(r.err).find("targets[x] = " + std::string(4300, '7') + " is not") != std::string::npos);
  const auto model = write_temp("big.json", R"({"layers":[{"name":"a","class":"C","kind":"linear","shape":[)" + big + ",4]}]}");
  r = cli({"plan", "-q", "fp8_per_block", "--model", model.string()});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: layers.0.shape.0: expected a positive integer, got int 18446744073709551616 in the model file");
}

TEST_CASE("CLI: lone surrogate escapes read as Python's json reads them", "[unit][cli]") {
  auto r = cli({"resolve", "-c", R"({"ignore":["a\ud800", "\udc00b", "\ud83d\ude00", "\ud800\ud800\udc00"]})"});
  CHECK(r.status == 0);  // a pair joins into one character; a lone half stays, written back as its escape
  CHECK(r.out == "{\"linear\":null,\"moe\":null,\"ignore\":[\"a\\ud800\",\"\\udc00b\",\"\xF0\x9F\x98\x80\",\"\\ud800\xF0\x90\x80\x80\"],\"targets\":null}\n");
  r = cli({"resolve", "-c", R"({"targets":{"\uDBFF":"bogus"}})"});
  CHECK(r.status == 2);
  CHECK(first_line(r.err).find("error: targets: targets[\\udbff] = bogus is not a valid online shorthand name") == 0);
  // The surrogate is a character of the name: patterns match it as the regex package does.
  const auto model = write_temp("surrogate.json", R"({"layers":[{"name":"m.x\ud800.q_proj","class":"Linear","kind":"linear"}]})");
  r = cli({"plan", "-q", "fp8_per_block", "-c", R"({"ignore":["re:.*[\ud7ff-\udbff]\\.q_proj"]})", "--model", model.string(),
           "--format", "json"});
  CHECK(r.status == 0);
  CHECK(r.out.find(R"("name":"m.x\ud800.q_proj","class":"Linear","kind":"linear","method":"unquantized")") != std::string::npos);
  // Raw surrogate bytes are not UTF-8: a file holding them is refused, as Python's decoding refuses it.
  const auto raw = write_temp("raw.json", "{\"ignore\":[\"\\ud800\", \"\xED\xA0\x80\"]}");
  r = cli({"resolve", "-c", "@" + raw.string()});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: invalid JSON in quantization_config at line 1, column 23: syntax error");
  // Error positions count the text as written, escapes and all.
  r = cli({"resolve", "-c", "{\"ignore\":[\"\\ud800\"],\n \"targets\": 5 x}"});
  CHECK(first_line(r.err) == "error: invalid JSON in quantization_config at line 2, column 15: syntax error");
}

TEST_CASE("CLI: vLLM's legacy resolver names quantization before it reads a non-object config", "[unit][cli]") {
  auto r = cli({"resolve", "--legacy", "-c", "5"});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: quantization_config is only supported when quantization is one of "
                             "['fp8_per_block', 'fp8_per_tensor', 'online'], got quantization=None");
  r = cli({"resolve", "--legacy", "-q", "fp8", "-c", "[1]"});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: quantization_config is only supported when quantization is one of "
                             "['fp8_per_block', 'fp8_per_tensor', 'online'], got quantization='fp8'");
  r = cli({"resolve", "--legacy", "-q", "fp8_per_block", "-c", "5"});  // an online name: the config's type decides
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: quantization_config must be a JSON object or null, got int");
  r = cli({"resolve", "-c", "\"x\""});  // the current schema builds the config first
  CHECK(first_line(r.err) == "error: quantization_config must be a JSON object or null, got str");
}

TEST_CASE("CLI: the regex package's compile errors word for word", "[unit][cli]") {
  const auto model = write_temp("one.json", R"({"layers":[{"name":"m.q_proj","class":"Linear","kind":"linear"}]})");
  auto r = cli({"plan", "-q", "fp8_per_block", "-c", R"({"ignore":["re:a\nb("]})", "--model", model.string()});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: missing ) at position 4 (line 2, column 3)");
  r = cli({"plan", "-q", "fp8_per_block", "-c", R"j({"ignore":["re:(?P<1>a)"]})j", "--model", model.string()});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: bad character in group name at position 5");
}

TEST_CASE("CLI: shape checks are opt-in", "[unit][cli]") {
  const auto model = write_temp("shapes.json", R"({"layers":[
    {"name":"m.layers.0.o_proj","class":"RowParallelLinear","kind":"linear","shape":[4096,4000]},
    {"name":"m.layers.0.up","class":"ColumnParallelLinear","kind":"linear","shape":[1000,4096]}]})");
  auto r = cli({"plan", "-q", "fp8_per_block", "--model", model.string(), "--format", "json"});
  CHECK(r.status == 0);
  r = cli({"plan", "-q", "fp8_per_block", "--model", model.string(), "--format", "json", "--check-shapes"});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: m.layers.0.o_proj: fp8_per_block needs in_features (4000) to be a multiple of 128 (1x128 activation groups)");
  CHECK(r.out.find("out_features 1000 is not a multiple of 128") != std::string::npos);
  r = cli({"plan", "-q", "fp8_per_tensor", "--model", model.string(), "--check-shapes", "--tp", "3"});
  CHECK(r.status == 2);
  CHECK(first_line(r.err).find("is not divisible by the tensor-parallel degree 3") != std::string::npos);
  fs::remove(model);
}
