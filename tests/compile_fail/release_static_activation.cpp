// expect: online Mxfp4OnlineLinearMethod cannot honour activation=QuantKey(f8e4m3fn,scale(f32,static,per_tensor),symmetric): static activation scales are not supported. Use a dynamic activation key, or 'activation: null'.
// Must not compile: vLLM 0.34's MXFP4 methods take an activation override, but not a static key.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::quant_config<qp::linear_spec<qp::mxfp4_static, qp::fp8_per_tensor_static>>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
