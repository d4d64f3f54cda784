// expect: quantization_config cannot change the weight of a Hadamard-rotated shorthand (mxfp4_hadamard32 -> fp8_per_block_static); use --quantization online and set `hadamard_size` on the spec instead.
// Must not compile: vLLM 0.34 refuses a new weight for a Hadamard shorthand.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::policy<qp::mxfp4_hadamard32, qp::quant_config<qp::linear_spec<qp::fp8_per_block_static>>>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
