#pragma once
// DeepSeek-V3 as vLLM builds it (../shared/models/deepseek-v3.json): MLA attention, 3 dense blocks, then
// 58 MoE blocks with a shared expert and 256 routed experts.
#include "qpolicy/typed/model_def.hpp"

namespace examples {
namespace qp = qpolicy;

inline constexpr auto deepseek_v3_attention = qp::block(
    qp::linear("model.layers.{i}.self_attn.fused_qkv_a_proj", "MergedColumnParallelLinear", {2112, 7168})
        .with_shards({1536, 576}).with_bias(false),
    qp::linear("model.layers.{i}.self_attn.q_b_proj", "ColumnParallelLinear", {24576, 1536}).with_bias(false),
    qp::linear("model.layers.{i}.self_attn.kv_b_proj", "ColumnParallelLinear", {32768, 512}).with_bias(false),
    qp::linear("model.layers.{i}.self_attn.o_proj", "RowParallelLinear", {7168, 16384}).with_bias(false));

inline constexpr auto deepseek_v3_dense_block = qp::block(
    deepseek_v3_attention,
    qp::linear("model.layers.{i}.mlp.gate_up_proj", "MergedColumnParallelLinear", {36864, 7168})
        .with_shards({18432, 18432}).with_bias(false),
    qp::linear("model.layers.{i}.mlp.down_proj", "RowParallelLinear", {7168, 18432}).with_bias(false));

inline constexpr auto deepseek_v3_moe_block = qp::block(
    deepseek_v3_attention,
    qp::linear("model.layers.{i}.mlp.gate", "GateLinear", {256, 7168}).not_quantizable().with_bias(false),
    qp::linear("model.layers.{i}.mlp.shared_experts.gate_up_proj", "MergedColumnParallelLinear", {4096, 7168})
        .with_shards({2048, 2048}).with_bias(false),
    qp::linear("model.layers.{i}.mlp.shared_experts.down_proj", "RowParallelLinear", {7168, 2048}).with_bias(false),
    qp::moe("model.layers.{i}.mlp.experts", "FusedMoE", 256, 7168, 2048));

inline constexpr auto deepseek_v3 = qp::model(
    "deepseek-v3",
    qp::packed("gate_up_proj", {"gate_proj", "up_proj"}),
    qp::packed("fused_qkv_a_proj", {"q_a_proj", "kv_a_proj_with_mqa"}),
    qp::other("model.embed_tokens", "VocabParallelEmbedding", {129280, 7168}),
    qp::repeat<3>(deepseek_v3_dense_block),
    qp::repeat<58>(deepseek_v3_moe_block, 3),
    qp::other("lm_head", "ParallelLMHead", {129280, 7168}));

}  // namespace examples
