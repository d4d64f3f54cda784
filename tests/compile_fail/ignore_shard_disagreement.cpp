// expect: Found different quantization schemes for the shards of model.layers.0.self_attn.qkv_proj. vLLM requires all to use the same scheme.
// Must not compile: ignore that catches one shard of a fused layer (current schema).
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::policy<qp::fp8_per_tensor, qp::quant_config<qp::ignore<"re:.*\\.v_proj$">>>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
