// expect: global_scheme: 'mxfp8' is not a valid OnlineQuantScheme
// Must not compile: a legacy scheme outside OnlineQuantScheme.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::policy<qp::online, qp::online_quant_config<qp::linear_scheme_override<qp::fp8_per_block>, qp::global_scheme<qp::mxfp8>>>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
