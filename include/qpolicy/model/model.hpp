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
  /// Compared from the end: the name ends in the fused name, after a '.' or at its start (a planner
  /// asks this of every layer, and the byte before the fused name rejects almost all of them).
  constexpr const packed_mapping* fused_entry(std::string_view layer_name) const {
    for (const auto& p : packed) {
      const std::size_t n = p.fused.size(), size = layer_name.size();
      if (n > size || (n < size && layer_name[size - n - 1] != '.')) continue;
      if (layer_name.ends_with(p.fused) && p.fused.find('.') == std::string::npos) return &p;
    }
    return nullptr;
  }
};

}  // namespace qpolicy
