#pragma once
// One plan case of vllm_release_cases.json through both front ends: its JSON through resolve and
// make_plan under the case's release, and its policy type (with the release as a parameter) on its
// model definition through the compile-time planner. The generated parts (gen_release_equivalence.py)
// call these.
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <string>
#include <string_view>

#include "../support/test_inputs.hpp"
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/typed/static_plan_runtime.hpp"

namespace release_equivalence {

namespace bj = boost::json;
namespace qp = qpolicy;

inline const bj::object& find_case(std::string_view id) {
  for (const auto& c : qpolicy::test::conformance_cases("QPOLICY_RELEASE_CASES"))
    if (c.at("id").as_string() == id) return c.as_object();
  FAIL("no release case " << id);
  throw;  // not reached
}

/// The runtime front end on the case: its plan, or the text of the first error (config or layer).
struct runtime_outcome {
  std::optional<qp::plan> plan;
  std::optional<qp::model_desc> model;
  std::string error;
};

inline runtime_outcome run_case(const bj::object& c) {
  qp::config_request request;
  if (const auto& q = c.at("quantization"); q.is_string()) request.quantization = std::string(q.as_string());
  if (const auto* cfg = c.if_contains("config")) request.config_text = bj::serialize(*cfg);
  request.release = *qp::find_release(std::string_view(c.at("vllm").as_string()));
  runtime_outcome out;
  try {
    const auto resolved = qp::resolve(request).config;
    out.model = qp::parse_model(bj::serialize(c.at("model")));
    out.plan = qp::make_plan(resolved, *out.model);
    if (const auto* e = out.plan->first_error()) out.error = *e;
  } catch (const qp::config_error& e) {
    out.error = e.diag().text();
  }
  return out;
}

/// Where two plans first differ, in words.
inline std::string difference(const qp::plan& a, const qp::plan& b, const qp::model_desc& model) {
  if (a.configured != b.configured) return "configured differs";
  if (a.release != b.release) return "release differs";
  if (a.layers.size() != b.layers.size()) return "layer counts differ";
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    const auto& x = a.layers[i];
    const auto& y = b.layers[i];
    if (!(x == y) || a.pattern_of(x) != b.pattern_of(y))
      return "layer " + model.layers[i].name + ": runtime " + std::string(qp::to_string(x.decided)) + ", compile time " +
             std::string(qp::to_string(y.decided));
  }
  if (a.summary != b.summary) return "summaries differ";
  return "no difference";
}

/// A case that plans: the plan computed while compiling equals the runtime plan.
template <class Policy, const auto& Model>
void check_success(std::string_view id) {
  INFO("release case " << id);
  const auto r = run_case(find_case(id));
  REQUIRE(r.error.empty());
  const auto& compiled = qp::plan_for<Policy, Model>;
  const auto other = qp::to_runtime(compiled);
  INFO(difference(*r.plan, other, *r.model));
  CHECK(r.plan->same_decisions(other));
}

/// A case that fails: the compile-time planner fails (plan_for would be a compile error) with the
/// runtime's first error; both the failure and its text are computed while compiling.
template <class Policy, const auto& Model>
void check_failure(std::string_view id) {
  INFO("release case " << id);
  const auto r = run_case(find_case(id));
  REQUIRE_FALSE(r.error.empty());
  static constexpr auto compiled = qp::detail::plan_or_error_size<Policy>(Model);
  static_assert(compiled.error_size > 0, "the compile-time planner accepts a case the runtime refuses");
  static constexpr auto text = qp::detail::plan_error_text<Policy, compiled.error_size>(Model);
  CHECK(std::string(text.text) == r.error);
}

}  // namespace release_equivalence
