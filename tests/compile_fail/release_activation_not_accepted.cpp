// expect: activation override is not supported for online Fp8PerBlockOnlineMoEMethod
// Must not compile: vLLM 0.34 takes an explicit activation only in the MXFP4 methods.
#include "models/qwen3_30b_a3b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::policy<qp::online, qp::quant_config<qp::moe_spec<qp::fp8_per_block_static, qp::fp8_per_token>>>;
constexpr auto& plan = qp::plan_for<policy, examples::qwen3_30b_a3b>;
int main() {}
