#pragma once
// A model's layer list as plain values (MODEL.json, or built at compile time): what the planner
// decides over. Shapes and sizes are optional; they feed shape checks and kernels.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qpolicy/keys/quant_key.hpp"

namespace qpolicy {

/// One module of the model: its vLLM name, class, kind and (optional) sizes.
struct layer_desc {
  std::string name;
  std::string class_name;
  layer_kind kind = layer_kind::other;
  bool quantizable = true;
  std::vector<std::int64_t> shape{};        // [out_features, in_features]
  std::vector<std::int64_t> shard_sizes{};  // fused layers: out_features per shard
  std::optional<std::int64_t> num_experts{}, hidden_size{}, intermediate_size{};
  std::optional<bool> bias{};
  constexpr bool operator==(const layer_desc&) const = default;
};

/// packed_modules_mapping entry: a fused last component and its shards.
struct packed_mapping {
  std::string fused;
  std::vector<std::string> shards;
  constexpr bool operator==(const packed_mapping&) const = default;
};

/// A model description: name, packed_modules_mapping and layers in construction order.
struct model_desc {
  std::string name;
  std::vector<packed_mapping> packed{};
  std::vector<layer_desc> layers{};
  constexpr bool operator==(const model_desc&) const = default;

  /// The mapping entry for a layer name's last dotted component, if it is fused.
  constexpr const packed_mapping* fused_entry(std::string_view layer_name) const {
    const auto dot = layer_name.rfind('.');
    const auto proj = dot == std::string_view::npos ? layer_name : layer_name.substr(dot + 1);
    for (const auto& p : packed)
      if (p.fused == proj) return &p;
    return nullptr;
  }
};

}  // namespace qpolicy
