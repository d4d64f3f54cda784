#pragma once
// Internal to `quantize`: the conversion as stages, each a function of its inputs that can be tested
// alone. plan_units (which tensors form which unit, and each one's formula) -> plan_output (the output
// file's tensors and metadata) -> stream_tensors (quantize unit by unit, copy the rest) ->
// quantization_config_json (the config.json block, from the plan alone).
#include <map>
#include <string>
#include <vector>

#include "checkpoint_files.hpp"
#include "qpolicy/io/checkpoint.hpp"
#include "qpolicy/io/safetensors.hpp"
#include "qpolicy/plan/plan.hpp"

namespace qpolicy::checkpoint_io {

/// One tensor to quantize: its formula, its scale tensor's name, and the joint unit it belongs to.
struct member {
  std::string tensor;  // "P.weight"
  key_id key = key_id::fp8_per_tensor_static;
  std::string_view scale_suffix;  // the scheme's scale tensor name: weight_scale or weight_scale_inv
  int joint = -1;  // members with the same joint id share one per-tensor scale (fused shards, gate/up)
};

/// Every tensor the plan quantizes, by name, and the joint units (members sharing one scale), by id.
struct quant_units {
  std::map<std::string, member> members;
  std::vector<std::vector<std::string>> joints;
};

/// Stage 1: the members of every quantized layer (its weight, a fused layer's shards, each expert's
/// gate/up/down), with the formula the layer's scheme contract gives each. Throws config_error for a
/// layer without a kernel, a missing or unusable tensor, or shards a scheme cannot take.
quant_units plan_units(const checkpoint& ck, const model_desc& model, const plan& p);

/// The output file: input order, each quantized weight as F8_E4M3 followed by its F32 scale tensor;
/// the metadata records the plan (method and deciding rule per quantized layer).
struct output_layout {
  std::vector<safetensors::tensor_spec> specs;
  std::map<std::string, std::string> metadata;
};
/// Stage 2.
output_layout plan_output(const checkpoint& ck, const quant_units& units, const model_desc& model, const plan& p);

/// Stage 3: every tensor into `out`, in input order: members quantized (a joint unit at its first
/// member, from the joint amax), the rest copied byte for byte; counts, bytes and tensors that belong
/// to no layer go into `sum`.
void stream_tensors(const checkpoint& ck, const quant_units& units, const model_desc& model,
                    const checkpoint_request& req, safetensors::writer& out, checkpoint_summary& sum);

/// Stage 4: the quantization_config block for the model's config.json (cli.md), from the plan alone.
std::string quantization_config_json(const model_desc& model, const plan& p, std::vector<std::string>& warnings);

}  // namespace qpolicy::checkpoint_io
