// expect: Found multiple quantization_config.targets matches for the shards of model.layers.0.self_attn.o_proj: [{
// Must not compile: two targets patterns match one layer.
#include "models/qwen2_5_0_5b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::quant_config<qp::targets<qp::target<"re:.*proj", qp::fp8_per_tensor>, qp::target<"*o_proj", qp::fp8_per_block>>>;
constexpr auto& plan = qp::plan_for<policy, examples::qwen2_5_0_5b>;
int main() {}
