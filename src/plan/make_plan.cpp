#include "qpolicy/io/json_front.hpp"
#include "qpolicy/match/pattern_set.hpp"
#include "qpolicy/plan/detail/build_plan.hpp"

namespace qpolicy {

plan make_plan(const resolved_config& config, const model_desc& model, const plan_options& options) {
  auto r = build_plan<match::pooled_pattern_set>(config, model, options);
  if (r.error) throw config_error(*r.error);
  return std::move(*r.value);
}

}  // namespace qpolicy
