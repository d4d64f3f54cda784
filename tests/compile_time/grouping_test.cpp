// The compile-time planner decides one layer per group of layers the config cannot tell apart. These
// cases stress the grouping against the runtime planner, which decides every layer: multi-digit and
// offset indices, the index in the last name component, fused layers whose shards rename the prefix,
// non-ASCII names, and patterns that single out particular indices.
#include "equivalence.hpp"
#include "qpolicy/typed/for_each_layer.hpp"

namespace qp = qpolicy;

namespace {
constexpr auto block = qp::block(
    qp::linear("h.{i}.attn.c_attn", "QKVParallelLinear", {96, 32}).with_shards({32, 32, 32}),
    qp::linear("h.{i}.attn.c_proj", "RowParallelLinear", {32, 32}),
    qp::linear("h.{i}.mlp.gate", "ReplicatedLinear", {4, 32}).not_quantizable(),
    qp::moe("h.{i}.mlp.experts", "FusedMoE", 4, 32, 64),
    qp::linear("h.{i}.c_attn_extra", "ColumnParallelLinear", {32, 32}),
    qp::linear("h\xc3\xa9.{i}.proj", "ColumnParallelLinear", {32, 32}));

constexpr auto edge_model = qp::model(
    "edge-cases", qp::packed("c_attn", {"q", "k", "v"}), qp::other("wte", "VocabParallelEmbedding"),
    qp::repeat<25>(block, 7), qp::linear("h.100.attn.c_proj", "RowParallelLinear", {32, 32}),
    qp::repeat<3>(qp::block(qp::linear("blocks.{i}", "RowParallelLinear", {32, 32})), 98),
    qp::other("lm_head", "ParallelLMHead"));

// The plan keeps each layer's decision packed into 64 bits: every field comes back, activation_key
// too where the activation is not a key (the plan comparison reads it only where it is).
constexpr bool packs_back(qp::layer_plan l) {
  using packed = qp::static_plan<std::remove_cvref_t<decltype(edge_model)>, 4, 4>;
  return packed::unpack(packed::pack(l)) == l;
}
static_assert(packs_back({}));
static_assert(packs_back({.decided = qp::method::fp8_per_block,
                          .weight = qp::key_id::fp8_per_tensor_static,
                          .activation = qp::activation_kind::key,
                          .activation_key = qp::key_id::fp8_per_token,
                          .source = qp::decided_by::targets,
                          .pattern = 3,
                          .target = qp::shorthand::fp8_per_tensor}));
static_assert(packs_back({.decided = qp::method::unquantized, .source = qp::decided_by::ignore, .pattern = 65533}));
static_assert(!packs_back({.decided = qp::method::unquantized, .source = qp::decided_by::ignore, .pattern = -2}));

template <class Policy>
void same_as_runtime(const char* quantization, const char* config, bool legacy = false, bool grouped = true) {
  INFO(config);
  qp::config_request request;
  request.quantization = quantization;
  request.config_text = config;
  request.legacy = legacy;
  const auto model = qp::to_runtime(edge_model);
  const auto runtime = qp::make_plan(qp::resolve(request).config, model);
  REQUIRE(runtime.first_error() == nullptr);
  const auto& compiled = qp::plan_for<Policy, edge_model>;
  INFO(equivalence::first_difference(runtime, qp::to_runtime(compiled), model));
  CHECK(runtime == compiled);
  // The point of grouping: far fewer decisions than layers (the index in the last component and the
  // non-ASCII record are decided per layer).
  if (grouped) CHECK(compiled.decided < compiled.size());
}
}  // namespace

TEST_CASE("grouped compile-time decisions equal per-layer runtime decisions", "[compile-time][grouping]") {
  using qp::ignore, qp::targets, qp::target;
  same_as_runtime<qp::policy<qp::fp8_per_block, qp::quant_config<ignore<"*.1?.*", "re:.*\\.(7|19|3[0-1])\\.", "h.23.k">>>>(
      "fp8_per_block", R"({"ignore": ["*.1?.*", "re:.*\\.(7|19|3[0-1])\\.", "h.23.k"]})");
  same_as_runtime<qp::quant_config<targets<target<"re:h\\.[0-9]*[02468]\\.", qp::fp8_per_block>,
                                           target<"re:h\\.[0-9]*[13579]\\.attn", qp::fp8_per_tensor>,
                                           target<"blocks.99", qp::fp8_per_channel>>>>(
      "online", R"({"targets": {"re:h\\.[0-9]*[02468]\\.": "fp8_per_block", "re:h\\.[0-9]*[13579]\\.attn": "fp8_per_tensor", "blocks.99": "fp8_per_channel"}})");
  same_as_runtime<qp::policy<qp::fp8_per_tensor, qp::online_quant_config<ignore<"re:.*\\.(8|2[0-9])\\.", "h.100.attn.c_proj">>>>(
      "fp8_per_tensor", R"({"ignore": ["re:.*\\.(8|2[0-9])\\.", "h.100.attn.c_proj"]})", true);
  // \b and \d are decided for ASCII names only (on "h\xc3\xa9..." the engine refuses): classes instead.
  same_as_runtime<qp::policy<qp::fp8_per_block, qp::quant_config<ignore<"re:h\\.1[0-9]\\.c_attn_extra$", "re:h\xc3\xa9\\.9">>>>(
      "fp8_per_block", R"({"ignore": ["re:h\\.1[0-9]\\.c_attn_extra$", "re:h\u00e9\\.9"]})");
}

TEST_CASE("compile-time plans with backtracking patterns and Unicode classes equal runtime plans",
          "[compile-time][grouping][regex]") {
  using qp::ignore;
  // Lookahead ("everything except"), a backreference with a lookbehind, and \w on the non-ASCII record:
  // the backreference compares digits, so every layer is decided on its own.
  same_as_runtime<qp::policy<qp::fp8_per_block,
                             qp::quant_config<ignore<"re:^(?!.*(?:c_attn|proj|blocks)).*", "re:h\\.(\\d)\\.attn\\.c_proj(?<=\\1\\.attn\\.c_proj)",
                                                     "re:\\w+\\.(?i:9)\\.PROJ">>>>(
      "fp8_per_block",
      R"json({"ignore": ["re:^(?!.*(?:c_attn|proj|blocks)).*", "re:h\\.(\\d)\\.attn\\.c_proj(?<=\\1\\.attn\\.c_proj)", "re:\\w+\\.(?i:9)\\.PROJ"]})json",
      false, false);
  // Backtracking patterns that tell no digit from another (no digit literal, no backreference, no set
  // splitting the digits) depend on an index only through its length: layers stay grouped, by length
  // too. Lengths 1, 2 and 3 occur (h.7-h.31, blocks.98-blocks.100); two patterns single lengths out.
  same_as_runtime<qp::policy<qp::fp8_per_block,
                             qp::quant_config<ignore<"re:^(?!.*(?:c_attn|proj|blocks)).*", "re:h\\.(?<=h\\.)\\d{2}\\.attn\\.c_proj",
                                                     "re:blocks\\.(?=\\d{3})", "re:(?=h\\.\\d\\.).*c_attn_extra">>>>(
      "fp8_per_block",
      R"json({"ignore": ["re:^(?!.*(?:c_attn|proj|blocks)).*", "re:h\\.(?<=h\\.)\\d{2}\\.attn\\.c_proj", "re:blocks\\.(?=\\d{3})", "re:(?=h\\.\\d\\.).*c_attn_extra"]})json");
  // One digit literal in a backtracking pattern: every layer on its own again.
  same_as_runtime<qp::policy<qp::fp8_per_block, qp::quant_config<ignore<"re:h\\.(?!1)\\d+\\.attn">>>>(
      "fp8_per_block", R"json({"ignore": ["re:h\\.(?!1)\\d+\\.attn"]})json", false, false);
  static_assert(qp::plan_for<qp::policy<qp::fp8_per_block, qp::quant_config<ignore<"re:h\\.(?!1)\\d+\\.attn">>>, edge_model>.decided ==
                qp::plan_for<qp::policy<qp::fp8_per_block, qp::quant_config<ignore<"re:h\\.(?!1)\\d+\\.attn">>>, edge_model>.size());
  // Regular patterns with the new classes stay on the DFA and keep the grouping.
  same_as_runtime<qp::policy<qp::fp8_per_block, qp::quant_config<ignore<"re:(?i)H\\.[[:digit:]]*7\\.", "re:\\p{L}+\\.1\\d\\.c_attn_extra$">>>>(
      "fp8_per_block", R"({"ignore": ["re:(?i)H\\.[[:digit:]]*7\\.", "re:\\p{L}+\\.1\\d\\.c_attn_extra$"]})");
}

TEST_CASE("model definitions are validated as the model file reader validates", "[compile-time][models]") {
  static_assert(qp::validate(edge_model).empty());
  constexpr auto shards = qp::model(qp::linear("x.qkv_proj", "QKVParallelLinear", {96, 32}).with_shards({32, 32, 16}));
  STATIC_REQUIRE(qp::validate(shards) == "layer 'x.qkv_proj': shard sizes add up to 80, not out_features 96");
  constexpr auto empty_class = qp::model(qp::linear("x", "", {1, 1}));
  STATIC_REQUIRE(qp::validate(empty_class) == "layer 'x': layer class is empty");
  constexpr auto stray_index = qp::model(qp::linear("x.{i}", "RowParallelLinear"));
  STATIC_REQUIRE(qp::validate(stray_index) == "layer 'x.{i}': \"{i}\" is only meaningful inside qp::repeat");
  constexpr auto twice = qp::model(qp::repeat<2>(qp::block(qp::linear("x.{i}.{i}", "RowParallelLinear"))));
  STATIC_REQUIRE(qp::validate(twice) == "layer 'x.{i}.{i}': \"{i}\" may appear once in a layer name");
  CHECK_THROWS_WITH(qp::to_runtime(shards), Catch::Contains("shard sizes add up to 80"));
}
