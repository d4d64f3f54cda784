// expect: targets: targets[re:.*experts] = fp8_per_block_static is not a valid online shorthand name; expected one of ['fp8_per_block', 'fp8_per_channel', 'fp8_per_tensor', 'int8_per_channel_weight_only', 'lut_b_moe', 'mxfp4', 'mxfp4_hadamard32', 'mxfp8', 'nvfp4_per_token']
// Must not compile: a targets value that is a key, not a shorthand.
#include "models/qwen3_30b_a3b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::quant_config<qp::targets<qp::target<"re:.*experts", qp::fp8_per_block_static>>>;
constexpr auto& plan = qp::plan_for<policy, examples::qwen3_30b_a3b>;
int main() {}
