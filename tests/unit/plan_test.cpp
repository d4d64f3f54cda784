// The runtime planner's own arithmetic: layer suffixes of the summary, shard names (str.replace of
// every occurrence), summary grouping, and the step budget stopping a plan (and the CLI) with its error.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "../support/process.hpp"
#include "../support/temp_dir.hpp"
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/plan/summary.hpp"

using namespace qpolicy;

namespace {

// The definition, written plainly: the part after the last all-digit dotted component.
std::string reference_suffix(const std::string& name) {
  std::vector<std::string> parts{""};
  for (char c : name) {
    if (c == '.') parts.emplace_back();
    else parts.back() += c;
  }
  for (std::size_t i = parts.size(); i-- > 0;) {
    const auto& p = parts[i];
    if (p.empty() || p.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string out;
    for (std::size_t j = i + 1; j < parts.size(); ++j) out += (j > i + 1 ? "." : "") + parts[j];
    return out;
  }
  return name;
}

static_assert(layer_suffix("model.layers.12.self_attn.qkv_proj") == "self_attn.qkv_proj");
static_assert(layer_suffix("model.layers.3.mlp.experts.7") == "");
static_assert(layer_suffix("lm_head") == "lm_head");
static_assert(layer_suffix("a.1b.c") == "a.1b.c");

test::process_result cli(std::vector<std::string> args) {
  const char* exe = std::getenv("QPOLICY_EXE");
  if (!exe) FAIL("QPOLICY_EXE is not set (run through meson test)");
  args.insert(args.begin(), exe);
  return test::run_process(args);
}

}  // namespace

TEST_CASE("layer_suffix agrees with its definition on edge and random names", "[unit][plan]") {
  std::vector<std::string> names{"", ".", "..", "1", "1.", ".1", "a.1", "a.1.", "a..b", "1.a", "a.12b.3", "a.1.b.2.c",
                                 "model.layers.0.mlp", "x.00.y", "0.1.2", "a.b.c", "a1.b2"};
  std::mt19937 rng(3);
  const std::string alphabet = "ab019.";
  for (int i = 0; i < 20000; ++i) {
    std::string n;
    for (int k = static_cast<int>(rng() % 12); k > 0; --k) n += alphabet[rng() % alphabet.size()];
    names.push_back(n);
  }
  for (const auto& n : names) {
    INFO(n);
    REQUIRE(std::string(layer_suffix(n)) == reference_suffix(n));
  }
}

TEST_CASE("shard names replace every occurrence of the fused name, as str.replace does", "[unit][plan]") {
  const auto model = parse_model(R"({"packed_modules_mapping": {"qkv_proj": ["q_proj", "k", "value_projection"]},
    "layers": [{"name": "qkv_proj.blocks.qkv_proj", "class": "QKVParallelLinear", "kind": "linear"},
               {"name": "model.qkv_proj", "class": "QKVParallelLinear", "kind": "linear"},
               {"name": "qkv_proj", "class": "QKVParallelLinear", "kind": "linear"}]})");
  config_request r;
  r.quantization = "fp8_per_tensor";
  r.config_text = R"({"ignore": ["q_proj.blocks.q_proj", "k.blocks.k", "value_projection.blocks.value_projection",
                                 "model.q_proj", "model.k", "model.value_projection", "q_proj", "k"]})";
  const auto p = make_plan(resolve(r).config, model);
  REQUIRE(p.layers.size() == 3);
  CHECK(p.layers[0].decided == method::unquantized);
  CHECK(p.pattern_of(p.layers[0]) == "q_proj.blocks.q_proj");
  CHECK(p.layers[1].decided == method::unquantized);
  CHECK(p.pattern_of(p.layers[1]) == "model.q_proj");
  // Two of three shards ignored: the shards disagree.
  REQUIRE(p.layers[2].failed());
  CHECK(p.error_of(p.layers[2]) ==
        "Found different quantization schemes for the shards of qkv_proj. vLLM requires all to use the same scheme.");
}

TEST_CASE("fused_entry is the entry whose fused name is the layer name's last dotted component", "[unit][plan]") {
  // Its definition, as vLLM's _is_fused_layer reads it: the part after the last '.', compared whole.
  const model_desc m{"m", {{"qkv_proj", {"q_proj"}}, {"", {"e"}}, {"a.b", {"c"}}, {"up", {"u"}}}, {}};
  const auto reference = [&](std::string_view name) -> const packed_mapping* {
    const auto dot = name.rfind('.');
    const auto proj = dot == std::string_view::npos ? name : name.substr(dot + 1);
    for (const auto& p : m.packed)
      if (p.fused == proj) return &p;
    return nullptr;
  };
  std::vector<std::string> names{"", ".", "qkv_proj", "x.qkv_proj", "xqkv_proj", "x.xqkv_proj", "qkv_proj.x", "a.b", "x.a.b",
                                 "b", "x.b", "up", ".up", "a.up", "aup", "up.", "x..up", "qkv_proj.qkv_proj"};
  std::mt19937 rng(7);
  const std::string alphabet = "abpu.";
  for (int i = 0; i < 20000; ++i) {
    std::string n;
    for (int k = static_cast<int>(rng() % 8); k > 0; --k) n += alphabet[rng() % alphabet.size()];
    names.push_back(n);
  }
  for (const auto& n : names) {
    INFO(n);
    REQUIRE(m.fused_entry(n) == reference(n));
  }
}

TEST_CASE("summary groups: one line per suffix, rule, pattern and key, whatever the layer order", "[unit][plan]") {
  std::string layers;
  for (int i = 0; i < 12; ++i)
    for (const char* part : {"self_attn.o_proj", "mlp.down_proj", "mlp.experts"})
      layers += std::string(layers.empty() ? "" : ",") + R"({"name": "model.layers.)" + std::to_string(i) + "." + part +
                R"(", "class": ")" + (std::string(part) == "mlp.experts" ? "FusedMoE" : "RowParallelLinear") +
                R"(", "kind": ")" + (std::string(part) == "mlp.experts" ? "moe" : "linear") + R"("})";
  const auto model = parse_model(R"({"layers": [)" + layers + "]}");
  config_request r;
  r.quantization = "online";
  r.config_text = R"({"targets": {"re:.*layers\\.[0-5]\\..*o_proj": "fp8_per_block", "re:.*layers\\.([6-9]|1.)\\..*o_proj": "fp8_per_tensor",
                                  "re:.*down_proj": "fp8_per_channel", "re:.*experts": "fp8_per_block"}})";
  const auto p = make_plan(resolve(r).config, model);
  CHECK(p.summary == std::vector<std::string>{
                         "mlp.down_proj: 12 (from targets: re:.*down_proj, fp8_per_channel)",
                         "mlp.experts: 12 (from targets: re:.*experts, fp8_per_block)",
                         "self_attn.o_proj: 6 (from targets: re:.*layers\\.([6-9]|1.)\\..*o_proj, fp8_per_tensor)",
                         "self_attn.o_proj: 6 (from targets: re:.*layers\\.[0-5]\\..*o_proj, fp8_per_block)",
                     });
}

TEST_CASE("a catastrophic pattern stops the plan within the budget, naming pattern and layer", "[unit][plan]") {
  const std::string name = std::string(40, 'a') + "b";
  const std::string model_text = R"({"layers": [{"name": ")" + name + R"(", "class": "RowParallelLinear", "kind": "linear"}]})";
  const test::temp_dir dir("plan");
  const auto model_path = dir.path() / "model.json";
  std::ofstream(model_path) << model_text;
  // The regex package takes minutes on this one (40 a's); qpolicy stops after its budget of steps.
  const auto stopped = cli({"plan", "-q", "fp8_per_block", "-c", R"({"ignore": ["re:(a|aa)+\\1$"]})", "--model",
                            model_path.string()});
  CHECK(stopped.status == 2);
  CHECK(stopped.err.find("error: qpolicy stopped matching pattern 're:(a|aa)+\\\\1$' against layer name '" + name +
                         "' after 100000 backtracking steps") != std::string::npos);
  // Regular, so the DFA decides it in linear time with the package's answer (no match): planned, exit 0.
  const auto regular = cli({"plan", "-q", "fp8_per_block", "-c", R"({"ignore": ["re:(a+)+$"]})", "--model",
                            model_path.string()});
  CHECK(regular.status == 0);
  CHECK(regular.out.find("1 quantized") != std::string::npos);
  // The C++ API: the layer's error in the plan, the others decided.
  config_request r;
  r.quantization = "fp8_per_block";
  r.config_text = R"({"ignore": ["re:(a|aa)+\\1$"]})";
  const auto p = make_plan(resolve(r).config, parse_model(model_text));
  REQUIRE(p.first_error());
  CHECK(p.first_error()->find("100000 backtracking steps") != std::string::npos);
}
