// expect: targets: targets key re:(experts is not a valid regex: missing ) at position 8
// Must not compile: a targets key that is not a valid regular expression.
#include "models/qwen3_30b_a3b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::quant_config<qp::targets<qp::target<"re:(experts", qp::fp8_per_block>>>;
constexpr auto& plan = qp::plan_for<policy, examples::qwen3_30b_a3b>;
int main() {}
