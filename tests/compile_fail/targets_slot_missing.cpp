// expect: targets pattern re:.*self_attn.* = nvfp4_per_token does not define a QuantSpec for QKVParallelLinear layers (matched at model.layers.0.self_attn.qkv_proj).
// Must not compile: a targets shorthand without a spec for the layer it matches.
#include "models/qwen3_30b_a3b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::quant_config<qp::targets<qp::target<"re:.*self_attn.*", qp::nvfp4_per_token>>>;
constexpr auto& plan = qp::plan_for<policy, examples::qwen3_30b_a3b>;
int main() {}
