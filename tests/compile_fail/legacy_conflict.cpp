// expect: quantization='fp8_per_tensor' conflicts with quantization_config['global_scheme']='fp8_per_block'. These must match when both are specified.
// Must not compile: a legacy global_scheme that contradicts quantization.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::policy<qp::fp8_per_tensor, qp::online_quant_config<qp::global_scheme<qp::fp8_per_block>>>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
