#pragma once
// The per-layer plan: for every layer of a model, the method, keys, and the rule that decided it (or
// the layer's error). Small values, parallel to the model's layer list; comparable across front ends.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qpolicy/keys/release.hpp"

namespace qpolicy {

/// The rule that decided a layer (plan field `source`).
enum class decided_by : std::uint8_t {
  none,
  linear,
  moe,
  targets,
  global,
  linear_scheme_override,
  moe_scheme_override,
  ignore,
};

constexpr std::string_view to_string(decided_by s) {
  constexpr std::string_view names[] = {"null",   "linear",  "moe", "targets", "global", "linear_scheme_override",
                                        "moe_scheme_override", "ignore"};
  return names[static_cast<std::size_t>(s)];
}

/// The activation a method receives: its own default, explicitly none, or a key.
enum class activation_kind : std::uint8_t { method_default, none, key };

/// The decision for one layer.
struct layer_plan {
  method decided = method::none;
  std::optional<key_id> weight{};
  activation_kind activation = activation_kind::none;
  key_id activation_key = key_id::fp8_per_tensor_dynamic;  // meaningful when activation == key
  decided_by source = decided_by::none;
  std::int32_t pattern = -1;  // index into plan::patterns
  std::int32_t error = -1;    // index into plan::errors; the other fields are then unset
  std::optional<shorthand> target{};  // the targets shorthand that decided the layer (none for a spec value)
  std::uint8_t hadamard = 0;          // the input rotation: log2(hadamard_size) + 1, 0 for none

  constexpr bool failed() const { return error >= 0; }
  constexpr bool quantized() const { return !failed() && decided != method::none && decided != method::unquantized; }
  constexpr bool operator==(const layer_plan&) const = default;
};

/// A rotation size as layer_plan stores it (a power of two, or 0 for none), and back.
constexpr std::uint8_t hadamard_code(std::int64_t size) {
  std::uint8_t code = 0;
  while (size > 0) {
    ++code;
    size >>= 1;
  }
  return code;
}
constexpr std::int64_t hadamard_size_of(const layer_plan& l) { return l.hadamard ? std::int64_t{1} << (l.hadamard - 1) : 0; }

/// Options that extend vLLM's behaviour without changing a compatible result (spec §8).
struct plan_options {
  bool check_shapes = false;
  int tp = 1;
};

/// A whole plan: one layer_plan per model layer, the config's patterns (ignore, then targets),
/// layer error texts, summary lines and warnings.
struct plan {
  bool configured = false;  // false when resolution gave None
  vllm_release release = newest_release;  // whose names the plan prints
  std::vector<layer_plan> layers{};
  std::vector<std::string> patterns{};
  std::vector<std::string> errors{};
  std::vector<std::string> summary{};
  std::vector<std::string> warnings{};

  /// The first layer error in model order (vLLM's error), if any.
  constexpr const std::string* first_error() const {
    for (const auto& l : layers)
      if (l.failed()) return &errors[static_cast<std::size_t>(l.error)];
    return nullptr;
  }
  constexpr std::string_view pattern_of(const layer_plan& l) const {
    return l.pattern >= 0 ? std::string_view(patterns[static_cast<std::size_t>(l.pattern)]) : std::string_view();
  }
  constexpr std::string_view error_of(const layer_plan& l) const {
    return l.error >= 0 ? std::string_view(errors[static_cast<std::size_t>(l.error)]) : std::string_view();
  }
  constexpr std::size_t count(method m) const {
    std::size_t n = 0;
    for (const auto& l : layers) n += !l.failed() && l.decided == m;
    return n;
  }
  /// Layer-by-layer equality of decisions, patterns and error texts (not of warnings).
  constexpr bool same_decisions(const plan& o) const {
    if (configured != o.configured || release != o.release || layers.size() != o.layers.size()) return false;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const auto& a = layers[i];
      const auto& b = o.layers[i];
      if (a.decided != b.decided || a.weight != b.weight || a.activation != b.activation || a.source != b.source ||
          a.target != b.target || a.hadamard != b.hadamard || pattern_of(a) != o.pattern_of(b) || error_of(a) != o.error_of(b) ||
          (a.activation == activation_kind::key && a.activation_key != b.activation_key))
        return false;
    }
    return summary == o.summary;
  }
};

}  // namespace qpolicy
