#pragma once
// The runtime planner's whole pass: every layer decided, the summary made, the shapes checked. Kept
// apart from planner.hpp so that the compile-time front end does not parse the summary code.
#include "qpolicy/plan/detail/planner.hpp"
#include "qpolicy/plan/shapes.hpp"
#include "qpolicy/plan/summary.hpp"

namespace qpolicy {

/// Decides every layer of `model` under `config`. Errors before any layer (the "at least one" check,
/// a pattern qpolicy cannot run) come back as the outcome's error; layer errors live in the plan.
template <class Matcher>
constexpr outcome<plan> build_plan(const resolved_config& config, const model_desc& model, const plan_options& options = {}) {
  plan_session<Matcher> session(config, model);
  if (auto e = session.start()) return {std::nullopt, *e};
  plan& out = session.out;
  out.layers.reserve(model.layers.size());
  for (const auto& layer : model.layers) out.layers.push_back(session.decide(layer));
  session.finish();
  if (out.configured) {
    out.summary = summarize(out, model);
    if (options.check_shapes) check_shapes(out, model, options);
  }
  return {std::move(out), std::nullopt};
}

}  // namespace qpolicy
