// expect: hadamard_size is not yet supported for online Fp8PerBlockOnlineLinearMethod; supported: ['Mxfp4OnlineLinearMethod']
// Must not compile: vLLM 0.34 rotates only the MXFP4 linear method's input.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::quant_config<qp::linear_spec<qp::fp8_per_block_static, qp::unset, qp::hadamard<32>>>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
