// expect: online quantization for QKVParallelLinear with weight=QuantKey(u8,scale(u8,dynamic,GroupShape(row=1, col=32)),symmetric) is not supported
// Must not compile: before vLLM 0.34 `weight: "mxfp4"` is the dynamic key, which no dispatch table holds.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::policy<qp::online, qp::quant_config<qp::linear_spec<qp::mxfp4_dynamic, qp::null>>, qp::vllm_0_30>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
