#pragma once
// Mixtral-8x7B as vLLM builds it (../shared/models/mixtral-8x7b.json): 32 blocks of 8 experts.
#include "qpolicy/typed/model_def.hpp"

namespace examples {
namespace qp = qpolicy;

inline constexpr auto mixtral_8x7b_block = qp::block(
    qp::linear("model.layers.{i}.self_attn.qkv_proj", "QKVParallelLinear", {6144, 4096})
        .with_shards({4096, 1024, 1024}).with_bias(false),
    qp::linear("model.layers.{i}.self_attn.o_proj", "RowParallelLinear", {4096, 4096}).with_bias(false),
    qp::linear("model.layers.{i}.block_sparse_moe.gate", "ReplicatedLinear", {8, 4096}).not_quantizable().with_bias(false),
    qp::moe("model.layers.{i}.block_sparse_moe.experts", "FusedMoE", 8, 4096, 14336));

inline constexpr auto mixtral_8x7b = qp::model(
    "mixtral-8x7b",
    qp::packed("qkv_proj", {"q_proj", "k_proj", "v_proj"}),
    qp::other("model.embed_tokens", "VocabParallelEmbedding", {32000, 4096}),
    qp::repeat<32>(mixtral_8x7b_block),
    qp::other("lm_head", "ParallelLMHead", {32000, 4096}));

}  // namespace examples
