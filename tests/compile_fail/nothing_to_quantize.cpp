// expect: OnlineQuantizationConfig requires at least one of quantization_config.linear, quantization_config.moe, or quantization_config.targets to be set.
// Must not compile: an online config with nothing but ignore.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::quant_config<qp::ignore<"lm_head">>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
