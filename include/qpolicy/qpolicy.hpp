#pragma once
// Everything a host program uses: typed policies and model definitions, compile-time plans and their
// visit, the Hana dispatch of runtime plans, and the JSON front end. Kernel translation units include
// qpolicy/typed/for_each_layer.hpp (or the tag and plan headers) instead: no Hana, fmt or JSON there.
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/dispatch/dispatch.hpp"
#include "qpolicy/typed/for_each_layer.hpp"
#include "qpolicy/typed/model_def.hpp"
#include "qpolicy/typed/static_plan.hpp"
#include "qpolicy/typed/static_plan_runtime.hpp"
#include "qpolicy/typed/typed_config.hpp"
