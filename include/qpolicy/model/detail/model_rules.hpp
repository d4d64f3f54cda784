#pragma once
// The model rules, once for both front ends: the MODEL.json reader (src/json/model_json.cpp) and the
// typed model definitions (typed/model_def.hpp) check names, classes and fused shards with these,
// and print their field and kind lists from these tables. constexpr.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/keys/quant_key.hpp"

namespace qpolicy {

/// The fields of a layer and of a model file, as MODEL.json names them.
inline constexpr std::array<std::string_view, 10> layer_field_names{
    "name", "class", "kind", "quantizable", "shape", "shard_sizes", "num_experts", "hidden_size", "intermediate_size", "bias"};
inline constexpr std::array<std::string_view, 3> model_field_names{"name", "packed_modules_mapping", "layers"};

/// "a, b, c" from a list of names.
constexpr std::string join_names(std::span<const std::string_view> names, std::string_view quote = "") {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) out += ", ";
    out += std::string(quote) + std::string(names[i]) + std::string(quote);
  }
  return out;
}

/// The message for an unknown layer kind.
constexpr std::string unknown_layer_kind_message(std::string_view kind) {
  return "unknown layer kind " + text::py_repr(kind) + "; expected one of " + join_names(layer_kind_names, "'");
}

inline constexpr std::string_view empty_layer_name_message = "layer name is empty";
inline constexpr std::string_view empty_layer_class_message = "layer class is empty";

/// Empty when a fused layer's shard sizes add up to its out_features, else what is wrong.
constexpr std::string shard_sum_problem(std::span<const std::int64_t> shards, std::int64_t out_features) {
  std::int64_t sum = 0;
  for (auto s : shards) {
    const auto next = checked::add(sum, s);
    if (!next) return "shard sizes add up to more than 2^63 - 1, not out_features " + text::to_decimal(out_features);
    sum = *next;
  }
  if (sum != out_features)
    return "shard sizes add up to " + text::to_decimal(sum) + ", not out_features " + text::to_decimal(out_features);
  return {};
}

}  // namespace qpolicy
