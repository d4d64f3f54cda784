// expect: missing ) at position 1
// Must not compile: an ignore pattern that is not a valid regular expression (raised when tried).
#include "models/mixtral_8x7b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::policy<qp::fp8_per_block, qp::quant_config<qp::ignore<"re:(", "lm_head">>>;
constexpr auto& plan = qp::plan_for<policy, examples::mixtral_8x7b>;
int main() {}
