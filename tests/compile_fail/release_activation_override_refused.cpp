// expect: activation override (activation=QuantKey(f8e4m3fn,scale(f32,dynamic,per_token),symmetric)) is not yet supported for online Fp8PerBlockOnlineMoEMethod
// Must not compile: vLLM 0.30-0.33 refuse any explicit activation of a quantized layer.
#include "models/qwen3_30b_a3b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::policy<qp::online, qp::quant_config<qp::moe_spec<qp::fp8_per_block_static, qp::fp8_per_token>>, qp::vllm_0_33>;
constexpr auto& plan = qp::plan_for<policy, examples::qwen3_30b_a3b>;
int main() {}
