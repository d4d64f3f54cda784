#pragma once
// The order in which transformers and vLLM build a decoder's modules, for names alone: what a layer list
// derived from a checkpoint's tensor names (stored sorted by name) is put back into, so that "the first
// layer" means what it means in vLLM (its first error) and in transformers (the first of tied weights).
#include <algorithm>
#include <array>
#include <string>
#include <string_view>

namespace qpolicy {

/// The rank of a module name's component in construction order (embeddings, the layers; in a layer the
/// attention before the MLP, q/k/v/o, MLA's projections, the router before the experts, gate/up/down),
/// or -1 for a component it does not rank.
constexpr int module_part_rank(std::string_view part) {
  constexpr std::array<std::string_view, 25> order{
      "model",     "embed_tokens", "layers",      "self_attn",          "q_proj",       "k_proj",    "v_proj",
      "qkv_proj",  "q_a_proj",     "fused_qkv_a_proj", "q_b_proj",      "kv_a_proj_with_mqa", "kv_b_proj", "o_proj",
      "mlp",       "gate",         "router",      "experts",            "shared_experts", "gate_proj", "up_proj",
      "gate_up_proj", "down_proj", "norm",        "lm_head"};
  for (std::size_t i = 0; i < order.size(); ++i)
    if (order[i] == part) return static_cast<int>(i);
  return -1;
}

/// Whether module `a` is built before `b`: component by component, numbers as numbers, ranked
/// components by rank and before unranked ones, the rest by name; a prefix first.
constexpr bool module_order_less(std::string_view a, std::string_view b) {
  auto next = [](std::string_view& s) {
    const auto dot = s.find('.');
    const auto part = s.substr(0, dot);
    s = dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
    return part;
  };
  auto number = [](std::string_view p) {
    return !p.empty() && p.size() < 10 && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  auto value = [](std::string_view p) {
    long v = 0;
    for (char c : p) v = v * 10 + (c - '0');
    return v;
  };
  while (!a.empty() && !b.empty()) {
    const auto x = next(a), y = next(b);
    if (x == y) continue;
    if (number(x) && number(y)) return value(x) < value(y);
    const int rx = module_part_rank(x), ry = module_part_rank(y);
    if (rx >= 0 && ry >= 0) return rx < ry;
    if ((rx >= 0) != (ry >= 0)) return rx >= 0;
    return x < y;
  }
  return a.empty() && !b.empty();
}

}  // namespace qpolicy
