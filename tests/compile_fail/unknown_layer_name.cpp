// expect: no_layer_with_this_name_in_the_model
// Must not compile: a lookup of a layer the model does not have.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
constexpr auto& plan = qp::plan_for<qp::fp8_per_block, examples::llama_3_1_8b>;
static_assert(plan["model.layers.32.mlp.down_proj"].decided == qp::method::fp8_per_block);
int main() {}
