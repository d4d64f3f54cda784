#pragma once
// Internal to `quantize`: the conversion as stages, each a function of its inputs that can be tested
// alone. plan_units (which tensors form which unit, and each one's formula) -> plan_output (the output
// file's tensors and metadata) -> tensor_streamer (quantize in row chunks, copy the rest); the
// config.json block comes from the plan alone (checkpoint_format.hpp).
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "checkpoint_files.hpp"
#include "checkpoint_format.hpp"
#include "chunk_io.hpp"
#include "qpolicy/io/checkpoint.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/io/safetensors.hpp"
#include "qpolicy/plan/plan.hpp"
#include "requantize.hpp"

namespace qpolicy::checkpoint_io {

/// One tensor to quantize: its formula, its scale tensor's name, and the joint unit it belongs to.
struct member {
  std::string tensor;  // "P.weight"
  schemes::formula formula = schemes::formula::fp8_per_tensor_static;  // what quantizes it
  std::string_view scale_suffix;  // the scheme's scale tensor name: weight_scale or weight_scale_inv
  scale_spelling scale_shape = scale_spelling::grid;  // how the format spells the scale tensor's shape
  int joint = -1;  // members with the same joint id share one per-tensor scale (fused shards, gate/up; NVFP4's
                   // global scale)
  std::int64_t transform_size = 0;  // a rotating formula's Hadamard size (the layer's hadamard_size)
  std::string transform_tensor;     // a rotation's transform weight, written after this member's tensors
  /// The weight as the formula takes it: the input tensor's type and shape, or a requantized member's
  /// decoded [rows, cols] in the model dtype.
  safetensors::dtype type = safetensors::dtype::BF16;
  std::int64_t rows = 0, cols = 0;
  std::optional<stored_weight> stored;  // requantized: decoded from the checkpoint's format first
};

/// Every tensor the plan quantizes, by input tensor name (a requantized member's by its codes tensor),
/// and the joint units (members sharing one scale), by id.
struct quant_units {
  std::map<std::string, member> members;
  std::vector<std::vector<std::string>> joints;
};

/// Stage 1: the members of every quantized layer (its weight, a fused layer's shards, each expert's
/// gate/up/down), with the formula the layer's scheme contract gives each and the scale tensor name
/// of `format`. Throws config_error for a layer without a kernel, a missing or unusable tensor, or
/// shards a scheme cannot take.
quant_units plan_units(const checkpoint& ck, const model_desc& model, const plan& p, checkpoint_format format,
                       const quantized_input* input = nullptr, const composed_plan* composed = nullptr);

/// The output file: input order, each quantized weight as F8_E4M3 followed by its F32 scale tensor;
/// the metadata records the plan (method and deciding rule per quantized layer).
struct output_layout {
  std::vector<safetensors::tensor_spec> specs;
  std::vector<std::size_t> first_spec;  // per input tensor (input order), where its specs begin; one more at the end
  std::map<std::string, std::string> metadata;
  /// The specs input tensors [begin, end) write.
  std::span<const safetensors::tensor_spec> specs_of(std::size_t begin, std::size_t end) const {
    return std::span(specs).subspan(first_spec[begin], first_spec[end] - first_spec[begin]);
  }
};
/// Stage 2.
output_layout plan_output(const checkpoint& ck, const quant_units& units, const model_desc& model, const plan& p,
                          const std::set<std::string>& dropped = {}, const std::map<std::string, std::string>& renamed = {});

/// A conversion planned before any output: the layers, their decisions, the format, the units and
/// the output layout.
struct conversion {
  model_desc model;
  plan decisions;
  checkpoint_format format = checkpoint_format::automatic;
  quant_units units;
  output_layout layout;
  /// An already-quantized input: its quantization, the online plan composed with it, the tensors a
  /// requantized weight replaces, the kept tensors renamed, and the kept layers' config groups.
  std::optional<quantized_input> input;
  std::optional<composed_plan> composed;
  std::set<std::string> dropped;
  kept_layers kept;
};

/// Stages 1 and 2 after the plan: the model (the request's, or derived from the tensor names), its
/// plan (config_error for a plan error or no configuration), the format, the units and the layout.
conversion prepare_conversion(const checkpoint& ck, const checkpoint_request& req, checkpoint_summary& sum,
                              std::optional<quantized_input> input = std::nullopt);

/// An already-quantized input's part of prepare_conversion: its stored tensors checked, the online
/// plan composed with it (vLLM's build errors refused; a requantization vLLM refuses only at load time,
/// for want of a decoder, converted as a named extension), and the kept layers' re-expression.
void compose_with_checkpoint(const checkpoint& ck, conversion& c, quantized_input input, const checkpoint_request& req,
                             checkpoint_summary& sum);

/// The quantization_config block of a conversion (quantization_config, or for an already-quantized
/// input mixed_quantization_config), and its qpolicy_plan.json text.
boost::json::object conversion_config(const conversion& c);
std::string conversion_plan_json(const conversion& c);

/// Stage 3: the input's tensors, a range at a time in input order, into writers: members quantized
/// (a joint unit at its first member, from the joint amax, its other members kept until their turn,
/// which may come in a later range), the rest copied byte for byte; counts, bytes and tensors that
/// belong to no layer go into the summary.
class tensor_streamer {
 public:
  tensor_streamer(const checkpoint& ck, const conversion& c, const checkpoint_request& req, checkpoint_summary& sum);
  /// Tensors [begin, end) of the input order into `out`.
  void stream(std::size_t begin, std::size_t end, safetensors::writer& out);

 private:
  void write_member(const tensor_ref& t, const member& m, safetensors::writer& out);
  /// Calls `fn` with each chunk of a member's weight (granule bytes at a time): read from the file, or
  /// from its decoded weight.
  template <class Fn>
  void for_each_chunk(const tensor_ref& t, const member& m, std::size_t granule, Fn&& fn);
  /// A requantized member's decoded weight (decoded once; kept until the member is written).
  const std::vector<std::uint32_t>& decoded(const member& m);
  /// Writes one chunk's parts as the output format stores them: the codes (through the chunk writer),
  /// and the first-level scales appended to `scales` (written after the codes).
  void store_chunk(const member& m, chunk_writer& writer, std::vector<std::uint8_t>& scales);
  /// The amax a per-tensor member's scale comes from: its joint unit's (found once), or its own.
  float unit_amax(const tensor_ref& t, const member& m);
  const checkpoint& ck_;
  const conversion& c_;
  const checkpoint_request& req_;
  checkpoint_summary& sum_;
  tensor_quant_options options_;
  std::set<std::string> layer_names_;
  std::map<std::string, std::vector<stored_part>> ready_;  // CUDA per-tensor: quantized, not yet written
  std::map<int, float> joint_amax_;
  std::map<std::string, std::vector<std::uint32_t>> decoded_;
  // The streaming buffers, allocated once: the read chunks, a chunk's parts, two chunks' codes.
  read_buffers read_buffers_;
  std::vector<stored_part> parts_;
  std::vector<std::uint8_t> code_buffers_[2];
  std::size_t done_ = 0;
  std::uint64_t bytes_total_ = 0;
};

/// The output name of a quantized member's scale tensor: P.weight_scale or P.weight_scale_inv.
std::string scale_name(const member& m);
/// A quantized member's module, `P` of `P.weight`.
std::string module_of(const member& m);
/// How a member's weight is named in messages: its tensor, or the tensor its decode starts from.
std::string weight_text(const member& m);
/// The kernels' element type of a floating-point tensor dtype.
element element_of(safetensors::dtype d);

}  // namespace qpolicy::checkpoint_io
