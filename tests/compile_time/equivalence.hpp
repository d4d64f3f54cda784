#pragma once
// One model x config pair of the conformance cases, through both front ends: the JSON config of the
// case with the model's JSON file at run time, the policy type with the model definition at compile
// time. The two plans must agree layer by layer, and so must the configs and the models themselves.
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <string>

#include "../support/test_inputs.hpp"
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/typed/static_plan_runtime.hpp"

namespace equivalence {

namespace bj = boost::json;
namespace qp = qpolicy;

using qpolicy::test::slurp;
inline std::string env(const char* name) { return qpolicy::test::required_env(name); }

/// Case `id` of the release cases, or of config_cases.json (its legacy cases).
inline const bj::object& find_case(std::string_view id) {
  for (const char* file : {"QPOLICY_RELEASE_CASES", "QPOLICY_CONFIG_CASES"})
    for (const auto& c : qpolicy::test::conformance_cases(file))
      if (c.at("id").as_string() == id) return c.as_object();
  FAIL("no conformance case " << id);
  throw;  // not reached
}

inline qp::model_desc model_file(std::string_view name) {
  return qp::parse_model(slurp(env("QPOLICY_MODELS") + "/" + std::string(name) + ".json"));
}

/// Where two plans first differ, in words (empty when they agree).
inline std::string first_difference(const qp::plan& a, const qp::plan& b, const qp::model_desc& model) {
  if (a.configured != b.configured) return "configured differs";
  if (a.layers.size() != b.layers.size()) return "layer counts differ";
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    const auto& x = a.layers[i];
    const auto& y = b.layers[i];
    if (x.decided != y.decided || x.weight != y.weight || x.activation != y.activation || x.source != y.source ||
        x.target != y.target || x.hadamard != y.hadamard || a.pattern_of(x) != b.pattern_of(y))
      return "layer " + model.layers[i].name + ": runtime " + std::string(qp::to_string(x.decided)) + " by " +
             std::string(qp::to_string(x.source)) + " '" + std::string(a.pattern_of(x)) + "', compile time " +
             std::string(qp::to_string(y.decided)) + " by " + std::string(qp::to_string(y.source)) + " '" +
             std::string(b.pattern_of(y)) + "'";
  }
  if (a.summary != b.summary) return "summaries differ";
  return {};
}

/// Checks case `id` (a plan of a shared model that succeeds) against Policy on Model.
template <class Policy, const auto& Model>
void check(std::string_view id) {
  INFO("conformance case " << id);
  const auto& c = find_case(id);
  qp::config_request request;
  if (const auto& q = c.at("quantization"); q.is_string()) request.quantization = std::string(q.as_string());
  if (const auto* cfg = c.if_contains("config"); cfg && !cfg->is_null()) request.config_text = bj::serialize(*cfg);
  request.legacy = c.at("schema").as_string() == "legacy";
  if (const auto* v = c.if_contains("vllm")) request.release = *qp::find_release(std::string_view(v->as_string()));
  const auto resolved = qp::resolve(request).config;

  // The same config: the policy type lowers to what the JSON resolves to.
  const auto lowered = qp::lower<Policy>();
  REQUIRE_FALSE(lowered.error.has_value());
  CHECK(qp::resolved_to_json(*lowered.value) == qp::resolved_to_json(resolved));

  // The same model: the definition gives the model file's layers, field by field.
  const auto model = model_file(c.at("model_name").as_string());
  REQUIRE(model == qp::to_runtime(Model));

  const auto runtime = qp::make_plan(resolved, model);
  REQUIRE(runtime.first_error() == nullptr);
  const auto& compiled = qp::plan_for<Policy, Model>;
  INFO(first_difference(runtime, qp::to_runtime(compiled), model));
  CHECK(runtime == compiled);
  CHECK(runtime.same_decisions(qp::to_runtime(compiled)));
}

/// Policy on Model against the runtime front end given the same arguments as JSON (no conformance
/// case): `quantization` (empty for None), `config` (JSON text), `release`, the shared model file
/// `model_name`. The plan must succeed.
template <class Policy, const auto& Model>
void check_same(std::string_view quantization, std::string_view config, qp::vllm_release release,
                std::string_view model_name) {
  INFO("quantization " << quantization << ", config " << config << ", vLLM " << qp::to_string(release));
  qp::config_request request;
  if (!quantization.empty()) request.quantization = std::string(quantization);
  request.config_text = std::string(config);
  request.release = release;
  const auto resolved = qp::resolve(request).config;
  const auto lowered = qp::lower<Policy>();
  REQUIRE_FALSE(lowered.error.has_value());
  CHECK(qp::resolved_to_json(*lowered.value) == qp::resolved_to_json(resolved));
  const auto model = model_file(model_name);
  REQUIRE(model == qp::to_runtime(Model));
  const auto runtime = qp::make_plan(resolved, model);
  REQUIRE(runtime.first_error() == nullptr);
  const auto& compiled = qp::plan_for<Policy, Model>;
  INFO(first_difference(runtime, qp::to_runtime(compiled), model));
  CHECK(runtime.same_decisions(qp::to_runtime(compiled)));
}

}  // namespace equivalence
