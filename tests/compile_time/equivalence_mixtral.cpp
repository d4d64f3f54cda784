// Mixtral-8x7B: block_sparse_moe names, globs in both schemas.
#include "../../examples/models/mixtral_8x7b.hpp"
#include "equivalence.hpp"

namespace qp = qpolicy;
using equivalence::check;
using examples::mixtral_8x7b;
using qp::target, qp::targets, qp::ignore;

TEST_CASE("mixtral-8x7b: compile-time plans equal runtime plans", "[compile-time][mixtral]") {
  check<qp::policy<qp::fp8_per_tensor, qp::online_quant_config<>>, mixtral_8x7b>(
      "legacy/plan/mixtral-8x7b/global_per_tensor");
  check<qp::policy<qp::fp8_per_block,
                   qp::online_quant_config<ignore<"model.layers.1.self_attn.o_proj", "re:.*[qkv]_proj">>>,
        mixtral_8x7b>("legacy/plan/mixtral-8x7b/global_per_block_docs_ignore");
  check<qp::policy<qp::fp8_per_block, qp::online_quant_config<ignore<"*o_proj", "lm_head">>>, mixtral_8x7b>(
      "legacy/plan/mixtral-8x7b/ignore_glob_is_literal");
  check<qp::policy<qp::fp8_per_block, qp::online_quant_config<ignore<"re:.*experts$">>>, mixtral_8x7b>(
      "legacy/plan/mixtral-8x7b/ignore_experts_regex");
  check<qp::fp8_per_block, mixtral_8x7b>("current/plan/mixtral-8x7b/shorthand_fp8_per_block");
  check<qp::policy<qp::fp8_per_tensor,
                   qp::quant_config<ignore<"model.layers.1.self_attn.o_proj", "re:.*[qkv]_proj">>>,
        mixtral_8x7b>("current/plan/mixtral-8x7b/docs_ignore_example");
  check<qp::policy<qp::fp8_per_tensor, qp::quant_config<ignore<"model.layers.*.mlp.experts.*">>>, mixtral_8x7b>(
      "current/plan/mixtral-8x7b/ignore_experts_glob_trailing");
  check<qp::quant_config<targets<target<"re:.*block_sparse_moe\\.experts$", qp::fp8_per_block>,
                                 target<"re:.*self_attn\\..*", qp::fp8_per_tensor>>>,
        mixtral_8x7b>("current/plan/mixtral-8x7b/targets_block_sparse_moe");
  check<qp::policy<qp::fp8_per_tensor, qp::quant_config<ignore<"re:.*block_sparse_moe\\.gate">>>, mixtral_8x7b>(
      "current/plan/mixtral-8x7b/mixtral_ignore_gate_noop");
  check<qp::policy<qp::nvfp4_per_token, qp::quant_config<ignore<"re:model\\.layers\\.0\\.">>>, mixtral_8x7b>(
      "current/plan/mixtral-8x7b/nvfp4_moe_ignore_layer0");
}
