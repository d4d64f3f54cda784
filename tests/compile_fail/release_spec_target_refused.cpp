// expect: targets: targets[re:.*down_proj] = {'weight': 'fp8_per_channel_static'} is not a valid online shorthand name
// Must not compile: before vLLM 0.34 a targets value is a shorthand name only.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::policy<qp::online, qp::quant_config<qp::targets<qp::target<"re:.*down_proj", qp::spec<qp::fp8_per_channel_static>>>>,
                          qp::vllm_0_32>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
