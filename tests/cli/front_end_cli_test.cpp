// The CLI's front end: exit statuses and the first stderr line, numbers and strings printed as Python
// prints them, vLLM's order of checks, the regex package's compile errors, opt-in shape checks.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../support/process.hpp"
#include "../support/temp_dir.hpp"
#include "../support/test_inputs.hpp"

using namespace qpolicy;
namespace fs = std::filesystem;

namespace {
fs::path write_temp(const std::string& name, const std::string& text) {
  static const test::temp_dir dir("cli");  // removed when the tests end
  const auto p = dir.path() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}
test::process_result cli(std::vector<std::string> args) {
  args.insert(args.begin(), test::required_env("QPOLICY_EXE"));
  return test::run_process(args);
}
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
}  // namespace

TEST_CASE("CLI: exit status and first stderr line", "[cli]") {
  auto r = cli({"resolve", "-c", "{\"linear\": }"});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: invalid JSON in quantization_config at line 1, column 12: syntax error");
  r = cli({"resolve", "-c", "{\"linear\": \"fp8_per_block\", // comment\n}"});
  CHECK(r.status == 2);  // inline JSON is strict
  const auto file = write_temp("cfg.json", "{\n  // files may hold comments\n  \"linear\": \"fp8_per_block\",\n}\n");
  r = cli({"resolve", "-c", "@" + file.native()});
  CHECK(r.status == 0);
  CHECK(r.out == "{\"linear\":{\"weight\":\"fp8_per_block_static\"},\"moe\":null,\"ignore\":[],\"targets\":null}\n");
  r = cli({"resolve", "-c", "@/nonexistent/cfg.json"});
  CHECK(r.status == 1);
  CHECK(first_line(r.err) == "error: cannot read the quantization_config file '/nonexistent/cfg.json': No such file or directory");
  r = cli({"plan", "-q", "fp8_per_block"});
  CHECK(r.status == 1);
  CHECK(first_line(r.err) == "error: plan needs --model MODEL.json or --model-dir DIR");
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

// Messages fed through the CLI, each with its exit status: numbers print as Python prints them.
// (vLLM 0.30-0.33 print a targets value that is not a shorthand with str(); 0.34 names its type.)
TEST_CASE("CLI: integers of any size print exactly, as Python's int", "[cli]") {
  const std::string big = "18446744073709551616";  // 2^64: a double in Boost.JSON, an int in Python
  auto r = cli({"resolve", "--vllm", "0.33", "-c", R"({"targets":{"x":)" + big + "}}"});
  CHECK(r.status == 2);
  CHECK(first_line(r.err).find("error: targets: targets[x] = 18446744073709551616 is not a valid online shorthand name") == 0);
  r = cli({"resolve", "--vllm", "0.33", "-c", R"({"targets":{"x":[-123456789012345678901234567890, 1.5]}})"});
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
  r = cli({"resolve", "--vllm", "0.33", "-c", R"({"targets":{"x":)" + big + R"(, "x": 1.5}})"});
  CHECK(first_line(r.err).find("targets[x] = 1.5 is not") != std::string::npos);
  // Python's int() refuses more than 4300 digits, and so its json.
  // (Strings built from named parts: GCC 12 warns falsely on a literal + a temporary string, -Wrestrict.)
  const std::string digits_4300(4300, '7'), digits_4301(4301, '7');
  r = cli({"resolve", "-c", "{\"targets\":\n{\"x\":" + digits_4301 + "}}"});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: invalid JSON in quantization_config at line 2, column 6: Exceeds the limit (4300 digits) "
                             "for integer string conversion: value has 4301 digits; use sys.set_int_max_str_digits() to increase the limit");
  r = cli({"resolve", "--vllm", "0.33", "-c", R"({"targets":{"x":)" + digits_4300 + "}}"});
  CHECK(first_line(r.err).find("targets[x] = " + digits_4300 + " is not") != std::string::npos);
  const auto model = write_temp("big.json", R"({"layers":[{"name":"a","class":"C","kind":"linear","shape":[)" + big + ",4]}]}");
  r = cli({"plan", "-q", "fp8_per_block", "--model", model.string()});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: layers.0.shape.0: expected a positive integer, got int 18446744073709551616 in the model file");
}

TEST_CASE("CLI: lone surrogate escapes read as Python's json reads them", "[cli]") {
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
  r = cli({"resolve", "-c", "@" + raw.native()});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: invalid JSON in quantization_config at line 1, column 23: syntax error");
  // Error positions count the text as written, escapes and all.
  r = cli({"resolve", "-c", "{\"ignore\":[\"\\ud800\"],\n \"targets\": 5 x}"});
  CHECK(first_line(r.err) == "error: invalid JSON in quantization_config at line 2, column 15: syntax error");
}

TEST_CASE("CLI: vLLM's legacy resolver names quantization before it reads a non-object config", "[cli]") {
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

TEST_CASE("CLI: the regex package's compile errors word for word", "[cli]") {
  const auto model = write_temp("one.json", R"({"layers":[{"name":"m.q_proj","class":"Linear","kind":"linear"}]})");
  auto r = cli({"plan", "-q", "fp8_per_block", "-c", R"({"ignore":["re:a\nb("]})", "--model", model.string()});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: missing ) at position 4 (line 2, column 3)");
  r = cli({"plan", "-q", "fp8_per_block", "-c", R"j({"ignore":["re:(?P<1>a)"]})j", "--model", model.string()});
  CHECK(r.status == 2);
  CHECK(first_line(r.err) == "error: bad character in group name at position 5");
}

TEST_CASE("CLI: shape checks are opt-in", "[cli]") {
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

TEST_CASE("CLI: --vllm picks a release; an unknown one is a usage error listing the known ones", "[cli]") {
  auto r = cli({"resolve", "--vllm", "0.29", "-q", "fp8_per_block"});
  CHECK(r.status == 1);
  CHECK(first_line(r.err) == "error: --vllm must be a vLLM release qpolicy knows, one of ['0.30', '0.31', '0.32', '0.33', "
                             "'0.34']; got '0.29'");
  r = cli({"resolve", "--vllm=latest", "-q", "fp8_per_block"});
  CHECK(r.status == 1);
  CHECK(first_line(r.err).find("got 'latest'") != std::string::npos);
  r = cli({"resolve", "--legacy", "--vllm", "0.33", "-q", "fp8_per_block"});
  CHECK(r.status == 1);
  CHECK(first_line(r.err) == "error: --legacy is a schema of its own (in no vLLM release from 0.29 on); it takes no --vllm");
  r = cli({"resolve", "--vllm", "0.33", "--vllm", "0.34", "-q", "fp8_per_block"});
  CHECK(r.status == 1);
  // The same arguments, two releases, two answers (spec §9): MXFP8 is dynamic before 0.34.
  r = cli({"resolve", "--vllm", "0.33", "-q", "mxfp8"});
  CHECK(r.out == "null\n");
  r = cli({"resolve", "--vllm", "0.33", "-q", "online", "-c", R"({"linear": "mxfp8"})"});
  CHECK(r.out == "{\"linear\":{\"weight\":\"mxfp8\"},\"moe\":null,\"ignore\":[],\"targets\":null}\n");
  r = cli({"resolve", "--vllm", "0.31", "-q", "online", "-c", R"({"linear": {"weight": "int8_per_group_32"}})"});
  CHECK(r.status == 2);
  CHECK(first_line(r.err).find("error: linear.weight: unknown quantization name 'int8_per_group_32'") == 0);
}

TEST_CASE("CLI: surprising release behaviour gets a warning that says what vLLM will do", "[cli]") {
  auto r = cli({"resolve", "--vllm", "0.33", "-q", "fp8_per_block", "-c", R"({"linear": {"activation": "fp8_per_token"}})"});
  CHECK(r.status == 0);
  CHECK(first_line(r.err).find("warning: vLLM 0.33 replaces the linear spec of quantization='fp8_per_block' with the one "
                               "given (its `or` merge), which has no weight: linear layers stay unquantized") == 0);
  r = cli({"resolve", "--vllm", "0.30", "-q", "online", "-c", R"({"moe": {"weight": "mxfp4"}})"});
  CHECK(first_line(r.err).find("warning: in vLLM 0.30, moe.weight 'mxfp4' is the dynamic MXFP4 key") == 0);
  r = cli({"resolve", "-q", "mxfp8", "-c", R"({"ignore": ["lm_head"]})"});
  CHECK(first_line(r.err).find("warning: vLLM 0.34 returns quantization_config unmerged for quantization='mxfp8'") == 0);
  // No warning where nothing surprises: the same merge under 0.34, the shorthand form under 0.30.
  r = cli({"resolve", "-q", "fp8_per_block", "-c", R"({"linear": {"activation": "fp8_per_token"}})"});
  CHECK(r.err.empty());
  r = cli({"resolve", "--vllm", "0.30", "-q", "online", "-c", R"({"moe": "mxfp4"})"});
  CHECK(r.err.empty());
}
