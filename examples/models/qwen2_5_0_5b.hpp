#pragma once
// Qwen2.5-0.5B as vLLM builds it (../shared/models/qwen2.5-0.5b.json): 24 dense blocks, tied head.
#include "qpolicy/typed/model_def.hpp"

namespace examples {
namespace qp = qpolicy;

inline constexpr auto qwen2_5_0_5b_block = qp::block(
    qp::linear("model.layers.{i}.self_attn.qkv_proj", "QKVParallelLinear", {1152, 896})
        .with_shards({896, 128, 128}).with_bias(true),
    qp::linear("model.layers.{i}.self_attn.o_proj", "RowParallelLinear", {896, 896}).with_bias(false),
    qp::linear("model.layers.{i}.mlp.gate_up_proj", "MergedColumnParallelLinear", {9728, 896})
        .with_shards({4864, 4864}).with_bias(false),
    qp::linear("model.layers.{i}.mlp.down_proj", "RowParallelLinear", {896, 4864}).with_bias(false));

inline constexpr auto qwen2_5_0_5b = qp::model(
    "qwen2.5-0.5b",
    qp::packed("qkv_proj", {"q_proj", "k_proj", "v_proj"}),
    qp::packed("gate_up_proj", {"gate_proj", "up_proj"}),
    qp::other("model.embed_tokens", "VocabParallelEmbedding", {151936, 896}),
    qp::repeat<24>(qwen2_5_0_5b_block));

}  // namespace examples
