// expect: quant_config takes linear_spec, moe_spec, ignore and targets parts only
// Must not compile: a quant_config part of the wrong kind.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::quant_config<qp::linear_spec<qp::fp8_per_block>, qp::global_scheme<qp::fp8_per_block>>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
