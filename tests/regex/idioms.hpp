#pragma once
// Real-world `re:` idioms (from llm-compressor and compressed-tensors recipes, vLLM and model cards: the
// router gates, vision towers and lm_head kept in full precision, "everything except ...", and the
// constructs the regex package adds) against layer names of real models. Each bit is regex.match's
// answer for names[k]; tests/regex/check_idioms.py re-derives every bit from the package, the unit
// suite checks the runtime matchers and tests/static/regex_idioms.cpp the compile-time one.
#include <cstdint>
#include <string_view>

namespace qpolicy_tests {

inline constexpr std::string_view idiom_names[] = {
    "lm_head",
    "model.embed_tokens",
    "model.layers.0.self_attn.qkv_proj",
    "model.layers.3.mlp.gate",
    "model.layers.12.mlp.gate_up_proj",
    "model.layers.5.mlp.down_proj",
    "model.layers.1.mlp.experts.1.down_proj",
    "model.layers.2.mlp.shared_experts",
    "model.layers.2.mlp.experts",
    "model.layers.7.mlp.shared_expert_gate",
    "visual.blocks.0.attn.qkv",
    "model.layers.15.block_sparse_moe.gate",
    "model.layers.16.self_attn.o_proj",
    "model.layers.0.mlp.router",
    "vpm.encoder.layers.0.mlp",
    "resampler.kv_proj",
    "modèle.cœur",
    "MODEL.layers.1.x",
};

struct idiom {
  std::string_view pattern;
  std::uint32_t matches;  // bit k: the pattern matches idiom_names[k]
};

inline constexpr idiom idioms[] = {
    {"lm_head", 0b000000000000000001},
    {"re:.*lm_head", 0b000000000000000001},
    {"re:.*lm_head.*", 0b000000000000000001},
    {"re:.*mlp.gate$", 0b000000000000001000},
    {"re:.*mlp\\.gate$", 0b000000000000001000},
    {"re:.*mlp.shared_expert_gate$", 0b000000001000000000},
    {"re:.*block_sparse_moe.gate", 0b000000100000000000},
    {"re:visual.*", 0b000000010000000000},
    {"re:vision_tower.*", 0b000000000000000000},
    {"re:multi_modal_projector.*", 0b000000000000000000},
    {"re:.*vpm.*", 0b000100000000000000},
    {"re:resampler.kv_proj", 0b001000000000000000},
    {"re:.*resampler.*", 0b001000000000000000},
    {"re:model.vision_model.*", 0b000000000000000000},
    {"re:.*router$", 0b000010000000000000},
    {"re:.*embed_tokens", 0b000000000000000010},
    {"re:.*self_attn.*", 0b000001000000000100},
    {"re:.*[qkv]_proj$", 0b001000000000000100},
    {"re:.*\\.(q|k|v|o)_proj$", 0b000001000000000000},
    {"re:.*mlp\\.experts\\.\\d+\\.(gate|up|down)_proj$", 0b000000000001000000},
    {"re:model\\.layers\\.(0|1|2|3)\\.", 0b000010000111001100},
    {"re:.*layers\\.(?:[0-9]|1[0-5])\\..*", 0b100110101111111100},
    {"re:^(?!.*(?:lm_head|gate)).*", 0b111111010111100110},
    {"re:(?!.*lm_head).*", 0b111111111111111110},
    {"re:.*(?<!shared_)experts", 0b000000000101000000},
    {"re:.*(?<=mlp\\.)down_proj$", 0b000000000000100000},
    {"re:model\\.layers\\.\\d+\\.(?!mlp\\.experts).*_proj$", 0b000001000000110100},
    {"re:(?=.*\\.mlp\\.).*down_proj", 0b000000000001100000},
    {"re:(?i).*LM_HEAD", 0b000000000000000001},
    {"re:(?i:MODEL)\\.layers", 0b100011101111111100},
    {"re:(?x) .* \\. gate $  # the router", 0b000000100000001000},
    {"re:.*\\b(gate|router)\\b$", 0b000010100000001000},
    {"re:model\\.layers\\.(\\d)\\.mlp\\.experts\\.\\1\\.", 0b000000000001000000},
    {"re:(?>.*)_proj", 0b000000000000000000},
    {"re:.*_proj(?(?=$)|\\.weight)", 0b001001000001110100},
    {"re:model\\.layers\\.[[:digit:]]+\\.mlp", 0b000010001111111000},
    {"re:\\w+\\.\\p{L}+", 0b111111111111111110},
    {"re:.*\\.cœur$", 0b010000000000000000},
};

}  // namespace qpolicy_tests
