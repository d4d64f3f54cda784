// expect: ignore.0: pattern 're:a(?R)?
// Must not compile: a regex feature the engine refuses (recursion).
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
using policy = qp::policy<qp::fp8_per_block, qp::quant_config<qp::ignore<"re:a(?R)?">>>;
constexpr auto& plan = qp::plan_for<policy, examples::llama_3_1_8b>;
int main() {}
