// DeepSeek-V3: both schemas, targets, shorthands, fused MLA projections.
#include "../../examples/models/deepseek_v3.hpp"
#include "equivalence.hpp"

namespace qp = qpolicy;
using examples::deepseek_v3;
using equivalence::check;

TEST_CASE("deepseek-v3: compile-time plans equal runtime plans", "[compile-time][deepseek-v3]") {
  using qp::target, qp::targets, qp::ignore;
  check<qp::policy<qp::online, qp::online_quant_config<qp::linear_scheme_override<qp::fp8_per_block>,
                                                       qp::moe_scheme_override<qp::fp8_per_tensor>>>,
        deepseek_v3>("legacy/plan/deepseek-v3/online_overrides");
  check<qp::policy<qp::fp8_per_tensor, qp::online_quant_config<ignore<"re:.*v_proj">>>, deepseek_v3>(
      "legacy/plan/deepseek-v3/ignore_v_proj_only");
  check<qp::policy<qp::fp8_per_block, qp::online_quant_config<ignore<"*o_proj", "lm_head">>>, deepseek_v3>(
      "legacy/plan/deepseek-v3/ignore_glob_is_literal");
  check<qp::policy<qp::online, qp::online_quant_config<qp::moe_scheme_override<qp::fp8_per_block>>>, deepseek_v3>(
      "legacy/plan/deepseek-v3/moe_only_override_linear_default");
  check<qp::fp8_per_tensor, deepseek_v3>("current/plan/deepseek-v3/shorthand_fp8_per_tensor");
  check<qp::policy<qp::fp8_per_block,
                   qp::quant_config<ignore<"lm_head", "re:.*embed_tokens.*", "re:.*mlp\\.gate$", "*.gate.*">>>,
        deepseek_v3>("current/plan/deepseek-v3/common_user_ignore_list");
  check<qp::quant_config<targets<target<"re:model\\.layers\\.1.*", qp::fp8_per_block>>>, deepseek_v3>(
      "current/plan/deepseek-v3/targets_regex_prefix_overmatch");
  check<qp::policy<qp::fp8_per_tensor, qp::quant_config<qp::linear_spec<qp::fp8_per_block>>>, deepseek_v3>(
      "current/plan/deepseek-v3/linear_override_block");
  check<qp::policy<qp::fp8_per_tensor, qp::quant_config<qp::moe_spec<qp::fp8_per_block>>>, deepseek_v3>(
      "current/plan/deepseek-v3/moe_override_block");
  check<qp::policy<qp::fp8_per_block, qp::quant_config<qp::linear_spec<qp::null, qp::null>>>, deepseek_v3>(
      "current/plan/deepseek-v3/moe_only_linear_disabled");
  check<qp::quant_config<targets<target<"re:.*mlp\\.experts$", qp::fp8_per_block>,
                                 target<"re:.*self_attn\\..*", qp::fp8_per_tensor>>>,
        deepseek_v3>("current/plan/deepseek-v3/targets_experts_block_attn_tensor");
  check<qp::policy<qp::nvfp4_per_token, qp::quant_config<ignore<"re:model\\.layers\\.0\\.">>>, deepseek_v3>(
      "current/plan/deepseek-v3/nvfp4_moe_ignore_layer0");
  check<qp::policy<qp::fp8_per_block, qp::quant_config<ignore<"model.embed_tokens", "re:.*kv_a_proj_with_mqa$",
                                                               "re:.*q_a_proj$", "re:.*gate$", "lm_head">>>,
        deepseek_v3>("current/plan/deepseek-v3/ds_mistral_large3_style_ignore");
  check<qp::quant_config<qp::linear_spec<qp::fp8_per_block>,
                         ignore<"lm_head", "re:.*embed_tokens.*", "re:.*mlp\\.gate$", "re:.*expert.*", "re:.*kv_b_proj.*">>,
        deepseek_v3>("current/plan/deepseek-v3/ds_rfc50281_linear_only");
  check<qp::quant_config<targets<target<"re:model\\.layers\\.[0-2]\\..*", qp::fp8_per_tensor>,
                                 target<"re:.*mlp\\.experts$", qp::fp8_per_block>>>,
        deepseek_v3>("current/plan/deepseek-v3/ds_targets_dense_layers_regex");
  check<qp::quant_config<targets<target<"*shared_experts*", qp::fp8_per_block>>>, deepseek_v3>(
      "current/plan/deepseek-v3/ds_targets_shared_experts_glob");
  check<qp::policy<qp::fp8_per_block, qp::quant_config<ignore<"model.layers.5.self_attn.q_a_proj",
                                                               "model.layers.5.self_attn.kv_a_proj_with_mqa">>>,
        deepseek_v3>("current/plan/deepseek-v3/ds_ignore_fused_qkv_a_exact_shards");
}
