// expect: quantization_config.targets is mutually exclusive with quantization_config.linear/moe, got targets={'re:.*experts': 'fp8_per_block'}, linear=fp8_per_block_static, moe=None.
// Must not compile: targets next to linear (mutual exclusion).
#include "models/qwen3_30b_a3b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::quant_config<qp::linear_spec<qp::fp8_per_block>, qp::targets<qp::target<"re:.*experts", qp::fp8_per_block>>>;
constexpr auto& plan = qp::plan_for<policy, examples::qwen3_30b_a3b>;
int main() {}
