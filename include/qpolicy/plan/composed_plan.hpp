#pragma once
// A plan for an already-quantized checkpoint: the online plan composed with what the checkpoint's own
// method does with each layer, as vLLM's resolve_quant_method (base_config.py) composes them in the
// chosen release (online-quant-config.md §9.3, §9.4):
//   0.30, 0.31  an online target on a layer the checkpoint quantizes is an error;
//   0.32        it requantizes linear layers (the checkpoint's weights decoded, then the online method);
//               experts are an error;
//   0.33, 0.34  it requantizes both; 0.34 refuses a Hadamard target there.
// Requantization needs the checkpoint method's dequantize_weight: a class without one fails when the
// weights load (vLLM's text), after every layer is built.
#include <cstdint>
#include <string>
#include <vector>

#include "qpolicy/model/model.hpp"
#include "qpolicy/plan/plan.hpp"
#include "qpolicy/source/checkpoint_source.hpp"

namespace qpolicy {

/// What happens to one layer of a quantized checkpoint.
enum class composition : std::uint8_t {
  unquantized,  // neither the checkpoint nor the online config quantizes it
  online,       // the checkpoint left it unquantized; the online method quantizes it
  kept,         // the checkpoint's method, as stored
  requantized,  // decoded from the checkpoint's format, then quantized by the online method
};

constexpr std::string_view to_string(composition c) {
  constexpr std::string_view names[] = {"unquantized", "online", "kept", "requantized"};
  return names[static_cast<std::size_t>(c)];
}

/// When vLLM raises a layer's error: building the model, or loading its weights (after every layer is built).
enum class error_stage : std::uint8_t { build, load };

/// One layer: the composition, the checkpoint's decision, and the layer's error (index into
/// composed_plan::errors, -1 for none).
struct composed_layer {
  composition kind = composition::unquantized;
  source::source_layer checkpoint;
  std::int32_t error = -1;
  error_stage stage = error_stage::build;
  /// A load-time error that a conversion replaced by decoding the weights itself (an extension beyond
  /// the release): the error's index, else -1.
  std::int32_t extension = -1;
  bool failed() const { return error >= 0; }
};

/// The online plan and the composition, layer by layer, with the checkpoint that was read.
struct composed_plan {
  plan online;
  source::checkpoint_source checkpoint;
  std::vector<composed_layer> layers;
  std::vector<std::string> errors;
  std::vector<std::string> summary;

  /// Sets `summary`: the checkpoint in words, and how many layers have each composition (failed ones
  /// not counted).
  void summarize();
  /// vLLM's error: the first layer that fails to build, else the first whose weights fail to load.
  const std::string* first_error() const;
  std::string_view error_of(const composed_layer& l) const {
    return l.error >= 0 ? std::string_view(errors[static_cast<std::size_t>(l.error)]) : std::string_view();
  }
  /// The load error an extension replaced ("" for none).
  std::string_view extension_of(const composed_layer& l) const {
    return l.extension >= 0 ? std::string_view(errors[static_cast<std::size_t>(l.extension)]) : std::string_view();
  }
};

/// Composes `online` (the plan of the online config for `model`) with the checkpoint's decisions in
/// the online plan's release.
composed_plan compose(plan online, const model_desc& model, const source::checkpoint_source& checkpoint);

/// `qpolicy plan --model-dir --format json`: the plan's fields per layer plus "composition" and
/// "checkpoint" ({"method", "quantized", "scheme", "rule"}), and the checkpoint's description.
std::string composed_plan_to_json(const composed_plan& p, const model_desc& model, const std::vector<std::string>& extra_warnings = {});

/// `qpolicy plan --model-dir --format table`.
std::string composed_plan_to_table(const composed_plan& p, const model_desc& model, const std::vector<std::string>& extra_warnings = {});

}  // namespace qpolicy
