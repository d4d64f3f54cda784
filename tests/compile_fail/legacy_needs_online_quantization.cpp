// expect: quantization_config is only supported when quantization is one of ['fp8_per_block', 'fp8_per_tensor', 'online'], got quantization='fp8_per_channel'
// Must not compile: a legacy config under a quantization that is not online.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::policy<qp::fp8_per_channel, qp::online_quant_config<>>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
