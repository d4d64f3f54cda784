#pragma once
// Qwen3-30B-A3B as vLLM builds it (../shared/models/qwen3-30b-a3b.json): 48 MoE blocks of 128 experts.
#include "qpolicy/typed/model_def.hpp"

namespace examples {
namespace qp = qpolicy;

inline constexpr auto qwen3_30b_a3b_block = qp::block(
    qp::linear("model.layers.{i}.self_attn.qkv_proj", "QKVParallelLinear", {5120, 2048})
        .with_shards({4096, 512, 512}).with_bias(false),
    qp::linear("model.layers.{i}.self_attn.o_proj", "RowParallelLinear", {2048, 4096}).with_bias(false),
    qp::linear("model.layers.{i}.mlp.gate", "ReplicatedLinear", {128, 2048}).not_quantizable().with_bias(false),
    qp::moe("model.layers.{i}.mlp.experts", "FusedMoE", 128, 2048, 768));

inline constexpr auto qwen3_30b_a3b = qp::model(
    "qwen3-30b-a3b",
    qp::packed("qkv_proj", {"q_proj", "k_proj", "v_proj"}),
    qp::packed("gate_up_proj", {"gate_proj", "up_proj"}),
    qp::other("model.embed_tokens", "VocabParallelEmbedding", {151936, 2048}),
    qp::repeat<48>(qwen3_30b_a3b_block),
    qp::other("lm_head", "ParallelLMHead", {151936, 2048}));

}  // namespace examples
