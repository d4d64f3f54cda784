// expect: linear.hadamard_size: hadamard_size must be a power of two, got 48
// Must not compile: vLLM 0.34 validates hadamard_size as a power of two.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::quant_config<qp::linear_spec<qp::mxfp4_static, qp::unset, qp::hadamard<48>>>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
