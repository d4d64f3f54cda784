// expect: linear: online shorthand 'int8_per_channel_weight_only' does not define a linear spec
// Must not compile: a linear spec from a shorthand without a linear slot.
#include "models/qwen3_30b_a3b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::policy<qp::fp8_per_tensor, qp::quant_config<qp::linear_spec<qp::int8_per_channel_weight_only>>>;
constexpr auto& plan = qp::plan_for<policy, examples::qwen3_30b_a3b>;
int main() {}
