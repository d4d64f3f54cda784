// expect: Layer lm_head was matched by quantization_config.targets (lm_head), but online quantization is not supported for ParallelLMHead.
// Must not compile: a targets pattern that names the head.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::quant_config<qp::targets<qp::target<"lm_head", qp::fp8_per_block>, qp::target<"re:.*proj", qp::fp8_per_tensor>>>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
