// expect: layer 'model.norm' is inside qp::repeat but has no "{i}", so its copies share one name
// Must not compile: a repeated layer whose name does not vary.
#include "models/llama_3_1_8b.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qp = qpolicy;
constexpr auto model = qp::model(qp::repeat<2>(qp::block(qp::other("model.norm", "RMSNorm"))));
constexpr auto& plan = qp::plan_for<qp::fp8_per_block, model>;
int main() {}
