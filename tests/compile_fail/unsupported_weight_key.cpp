// expect: online quantization for QKVParallelLinear with weight=QuantKey(f8e4m3fn,scale(f32,dynamic,per_token),symmetric) is not supported; supported weight keys: [
// Must not compile: a dynamic key as a weight key.
#include "models/qwen3_30b_a3b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::quant_config<qp::linear_spec<qp::fp8_per_token>>;
constexpr auto& plan = qp::plan_for<policy, examples::qwen3_30b_a3b>;
int main() {}
