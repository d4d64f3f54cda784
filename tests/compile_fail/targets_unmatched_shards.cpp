// expect: Found unmatched shards for model.layers.0.self_attn.qkv_proj: [set(), set(), {'re:.*\\.v_proj$'}]. vLLM requires all shards of a fused layer to match a target.
// Must not compile: a targets pattern that matches one shard of a fused layer.
#include "models/qwen2_5_0_5b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::quant_config<qp::targets<qp::target<"re:.*\\.v_proj$", qp::fp8_per_tensor>>>;
constexpr auto& plan = qp::plan_for<policy, examples::qwen2_5_0_5b>;
int main() {}
