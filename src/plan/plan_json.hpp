#pragma once
// Internal to the plan printers: a plan's JSON document as a value (plan_to_json serializes it; the
// composed plan's printer adds its fields to it).
#include <boost/json.hpp>

#include <string>
#include <vector>

#include "qpolicy/model/model.hpp"
#include "qpolicy/plan/plan.hpp"

namespace qpolicy {

/// `qpolicy plan --format json`'s document: {"layers": [...], "summary": [...], "warnings": [...]}.
boost::json::object plan_json_object(const plan& p, const model_desc& model, const std::vector<std::string>& extra_warnings);

}  // namespace qpolicy
