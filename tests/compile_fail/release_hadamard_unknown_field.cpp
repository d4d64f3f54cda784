// expect: linear.hadamard_size: Unexpected keyword argument
// Must not compile: QuantSpec has no hadamard_size before vLLM 0.34.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::policy<qp::online, qp::quant_config<qp::linear_spec<qp::mxfp4_static, qp::unset, qp::hadamard<32>>>,
                          qp::vllm_0_33>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
