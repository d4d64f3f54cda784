#pragma once
// Layer lists the checkpoint methods' layer rules are tried on.
#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "qpolicy/model/model.hpp"

namespace qpolicy::test {

/// A Qwen3-MoE-shaped layer list: embeddings, two blocks (qkv, o, router, experts), the LM head.
inline qpolicy::model_desc moe_model() {
  qpolicy::model_desc m;
  m.packed = {{"qkv_proj", {"q_proj", "k_proj", "v_proj"}}, {"gate_up_proj", {"gate_proj", "up_proj"}}};
  m.layers.push_back({"model.embed_tokens", "VocabParallelEmbedding", qpolicy::layer_kind::other});
  for (int l = 0; l < 2; ++l) {
    const auto p = "model.layers." + std::to_string(l) + ".";
    m.layers.push_back({p + "self_attn.qkv_proj", "QKVParallelLinear", qpolicy::layer_kind::linear});
    m.layers.push_back({p + "self_attn.o_proj", "RowParallelLinear", qpolicy::layer_kind::linear});
    qpolicy::layer_desc router{p + "mlp.gate", "ReplicatedLinear", qpolicy::layer_kind::linear};
    router.quantizable = false;
    m.layers.push_back(router);
    qpolicy::layer_desc experts{p + "mlp.experts", "FusedMoE", qpolicy::layer_kind::moe};
    experts.num_experts = 4;
    m.layers.push_back(experts);
  }
  m.layers.push_back({"lm_head", "ParallelLMHead", qpolicy::layer_kind::other});
  return m;
}

inline const qpolicy::layer_desc& layer(const qpolicy::model_desc& m, std::string_view name) {
  for (const auto& l : m.layers)
    if (l.name == name) return l;
  FAIL("no layer " << name);
  throw;
}

}  // namespace qpolicy::test
