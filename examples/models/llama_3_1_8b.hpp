#pragma once
// Llama-3.1-8B-Instruct as vLLM builds it (../shared/models/llama-3.1-8b-instruct.json): 32 dense blocks.
#include "qpolicy/typed/model_def.hpp"

namespace examples {
namespace qp = qpolicy;

inline constexpr auto llama_3_1_8b_block = qp::block(
    qp::linear("model.layers.{i}.self_attn.qkv_proj", "QKVParallelLinear", {6144, 4096})
        .with_shards({4096, 1024, 1024}).with_bias(false),
    qp::linear("model.layers.{i}.self_attn.o_proj", "RowParallelLinear", {4096, 4096}).with_bias(false),
    qp::linear("model.layers.{i}.mlp.gate_up_proj", "MergedColumnParallelLinear", {28672, 4096})
        .with_shards({14336, 14336}).with_bias(false),
    qp::linear("model.layers.{i}.mlp.down_proj", "RowParallelLinear", {4096, 14336}).with_bias(false));

inline constexpr auto llama_3_1_8b = qp::model(
    "llama-3.1-8b-instruct",
    qp::packed("qkv_proj", {"q_proj", "k_proj", "v_proj"}),
    qp::packed("gate_up_proj", {"gate_proj", "up_proj"}),
    qp::other("model.embed_tokens", "VocabParallelEmbedding", {128256, 4096}),
    qp::repeat<32>(llama_3_1_8b_block),
    qp::other("lm_head", "ParallelLMHead", {128256, 4096}));

}  // namespace examples
