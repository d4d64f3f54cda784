// Compile-only: the matcher, the rules and the planner run during constant evaluation.
#include "qpolicy/plan/detail/build_plan.hpp"

namespace qp = qpolicy;
using qp::match::glob_mode;
using qp::match::match_one;

static_assert(match_one("re:.*v_proj", "model.layers.0.self_attn.qkv_proj", glob_mode::on).matched);
static_assert(!match_one("re:mlp", "model.layers.0.mlp", glob_mode::on).matched);
static_assert(match_one("*.mlp.experts", "model.layers.9.mlp.experts", glob_mode::on).matched);
static_assert(!match_one("*.mlp.experts", "model.layers.9.mlp.experts", glob_mode::off).matched);
static_assert(match_one("re:(", "x", glob_mode::on).error->message == "missing ) at position 1");
static_assert(qp::text::py_repr("re:.*\\.q_proj$") == "'re:.*\\\\.q_proj$'");
static_assert(qp::text::py_repr("it's") == "\"it's\"");
static_assert(qp::key_repr(qp::key_id::fp8_per_block_static) ==
              "QuantKey(f8e4m3fn,scale(f32,static,GroupShape(row=128, col=128)),symmetric)");

consteval std::size_t per_block_layers() {
  qp::model_desc model{"tiny", {{"qkv_proj", {"q_proj", "k_proj", "v_proj"}}}, {}};
  for (int i = 0; i < 4; ++i) {
    const auto prefix = "model.layers." + qp::text::to_decimal(i);
    model.layers.push_back({prefix + ".self_attn.qkv_proj", "QKVParallelLinear", qp::layer_kind::linear});
    model.layers.push_back({prefix + ".mlp.down_proj", "RowParallelLinear", qp::layer_kind::linear});
  }
  qp::current_config cfg = qp::shorthand_config(qp::shorthand::fp8_per_block, qp::newest_release);
  cfg.ignore = {"re:model\\.layers\\.(0|3)\\."};
  auto plan = qp::build_plan<qp::match::nfa_pattern_set>(qp::resolved_config(cfg), model);
  return plan.value->count(qp::method::fp8_per_block);
}
static_assert(per_block_layers() == 4);

int main() { return 0; }
