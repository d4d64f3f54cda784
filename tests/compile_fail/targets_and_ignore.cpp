// expect: Layer model.layers.0.self_attn.o_proj matches both quantization_config.ignore and quantization_config.targets (['re:.*o_proj']); a layer may not be referenced by both.
// Must not compile: a layer both ignored and targeted.
#include "models/mixtral_8x7b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::quant_config<qp::targets<qp::target<"re:.*o_proj", qp::fp8_per_tensor>>, qp::ignore<"re:.*layers\\.0\\..*">>;
constexpr auto& plan = qp::plan_for<policy, examples::mixtral_8x7b>;
int main() {}
