// Llama-3.1-8B, Qwen2.5-0.5B and Qwen3-30B-A3B: fused qkv/gate_up shards, MoE, activation overrides.
#include "../../examples/models/llama_3_1_8b.hpp"
#include "../../examples/models/qwen2_5_0_5b.hpp"
#include "../../examples/models/qwen3_30b_a3b.hpp"
#include "equivalence.hpp"

namespace qp = qpolicy;
using equivalence::check;
using examples::llama_3_1_8b, examples::qwen2_5_0_5b, examples::qwen3_30b_a3b;
using qp::target, qp::targets, qp::ignore;

TEST_CASE("llama-3.1-8b: compile-time plans equal runtime plans", "[compile-time][llama]") {
  check<qp::policy<qp::fp8_per_tensor, qp::online_quant_config<>>, llama_3_1_8b>(
      "legacy/plan/llama-3.1-8b-instruct/global_per_tensor");
  check<qp::policy<qp::fp8_per_tensor, qp::online_quant_config<ignore<"re:.*qkv_proj">>>, llama_3_1_8b>(
      "legacy/plan/llama-3.1-8b-instruct/ignore_fused_name_regex_noop");
  check<qp::fp8_per_block, llama_3_1_8b>("current/plan/llama-3.1-8b-instruct/shorthand_fp8_per_block");
  check<qp::policy<qp::fp8_per_tensor, qp::quant_config<ignore<"re:.*qkv_proj">>>, llama_3_1_8b>(
      "current/plan/llama-3.1-8b-instruct/ignore_fused_name_regex");
  check<qp::policy<qp::fp8_per_block,
                   qp::quant_config<ignore<"lm_head", "re:.*embed_tokens.*", "re:.*mlp\\.gate$", "*.gate.*">>>,
        llama_3_1_8b>("current/plan/llama-3.1-8b-instruct/common_user_ignore_list");
  check<qp::quant_config<qp::linear_spec<qp::fp8_per_channel>, ignore<"lm_head", "re:.*down_proj">>, llama_3_1_8b>(
      "current/plan/llama-3.1-8b-instruct/online_linear_channel_ignore_head");
}

TEST_CASE("qwen2.5-0.5b: compile-time plans equal runtime plans", "[compile-time][qwen2.5]") {
  check<qp::policy<qp::fp8_per_tensor, qp::online_quant_config<>>, qwen2_5_0_5b>(
      "legacy/plan/qwen2.5-0.5b/global_per_tensor");
  check<qp::policy<qp::fp8_per_block,
                   qp::online_quant_config<ignore<"model.layers.1.self_attn.o_proj", "re:.*[qkv]_proj">>>,
        qwen2_5_0_5b>("legacy/plan/qwen2.5-0.5b/global_per_block_docs_ignore");
  check<qp::quant_config<targets<target<"re:model\\.layers\\.1.*", qp::fp8_per_block>>>, qwen2_5_0_5b>(
      "current/plan/qwen2.5-0.5b/targets_regex_prefix_overmatch");
  check<qp::fp8_per_channel, qwen2_5_0_5b>("current/plan/qwen2.5-0.5b/shorthand_fp8_per_channel");
}

TEST_CASE("qwen3-30b-a3b: compile-time plans equal runtime plans", "[compile-time][qwen3]") {
  check<qp::policy<qp::online, qp::online_quant_config<qp::linear_scheme_override<qp::fp8_per_block>,
                                                       qp::moe_scheme_override<qp::fp8_per_tensor>>>,
        qwen3_30b_a3b>("legacy/plan/qwen3-30b-a3b/online_overrides");
  check<qp::policy<qp::fp8_per_block, qp::online_quant_config<ignore<"re:.*experts$">>>, qwen3_30b_a3b>(
      "legacy/plan/qwen3-30b-a3b/ignore_experts_regex");
  check<qp::fp8_per_tensor, qwen3_30b_a3b>("current/plan/qwen3-30b-a3b/shorthand_fp8_per_tensor");
  check<qp::policy<qp::fp8_per_tensor,
                   qp::quant_config<ignore<"model.layers.1.self_attn.o_proj", "re:.*[qkv]_proj">>>,
        qwen3_30b_a3b>("current/plan/qwen3-30b-a3b/docs_ignore_example");
  check<qp::quant_config<targets<target<"re:model\\.layers\\.[0-3]\\.", qp::fp8_per_block>>>, qwen3_30b_a3b>(
      "current/plan/qwen3-30b-a3b/targets_first_layers");
  // 0.33: an activation-only spec replaces the shorthand's linear slot (the `or` merge).
  check<qp::policy<qp::fp8_per_block, qp::quant_config<qp::linear_spec<qp::unset, qp::fp8_per_token>>, qp::vllm_0_33>,
        qwen3_30b_a3b>("current/plan/qwen3-30b-a3b/activation_override_per_token@0.33");
  check<qp::policy<qp::mxfp8, qp::quant_config<ignore<"lm_head">>, qp::vllm_0_33>, qwen3_30b_a3b>(
      "current/plan/qwen3-30b-a3b/mxfp8_with_ignore@0.33");
  check<qp::policy<qp::fp8_per_tensor, qp::quant_config<ignore<"model.layers.*.mlp.experts.*">>>, qwen3_30b_a3b>(
      "current/plan/qwen3-30b-a3b/ignore_experts_glob_trailing");
  check<qp::int8_per_channel_weight_only, qwen3_30b_a3b>("current/plan/qwen3-30b-a3b/int8_moe_weight_only");
}
