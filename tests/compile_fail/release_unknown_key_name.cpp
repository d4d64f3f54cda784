// expect: moe.weight: unknown quantization name 'lut_b'; expected one of ['fp8_per_block_dynamic', 'fp8_per_block_static', 'fp8_per_channel_static', 'fp8_per_tensor_dynamic', 'fp8_per_tensor_static', 'fp8_per_token', 'int4_per_group_32', 'int8_per_channel_static', 'int8_per_group_32', 'mxfp4', 'mxfp8', 'nvfp4_per_token']
// Must not compile: vLLM 0.33 has no lut_b key name (0.34 adds it).
#include "models/qwen3_30b_a3b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::policy<qp::online, qp::quant_config<qp::moe_spec<qp::lut_b, qp::null>>, qp::vllm_0_33>;
constexpr auto& plan = qp::plan_for<policy, examples::qwen3_30b_a3b>;
int main() {}
