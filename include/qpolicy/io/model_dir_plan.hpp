#pragma once
// `qpolicy plan --model-dir`: a Hugging Face model directory's layers (from its tensors' names, no tensor
// data read) and, for an already-quantized model, what its checkpoint holds; then the plan of an
// online config for it, composed with the checkpoint as the chosen vLLM release composes them.
#include <optional>
#include <string>
#include <vector>

#include "qpolicy/core/detail/maybe.hpp"
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/model/model.hpp"
#include "qpolicy/plan/composed_plan.hpp"
#include "qpolicy/source/checkpoint_source.hpp"

namespace qpolicy {

/// A model directory as a plan reads it.
struct model_dir_model {
  model_desc model;
  std::string convention;  // how the layers were found
  std::optional<source::checkpoint_source> checkpoint;  // the checkpoint's quantization, when it has one
  std::vector<std::string> warnings;
};

/// Reads DIR's config.json and safetensors headers: the layers (`model` when given, else derived from
/// the tensor names, packed and gpt-oss expert tensors included) and the checkpoint's quantization_config
/// (read_checkpoint_source). config_error (exit 2) for a directory that is no model or a checkpoint
/// method this build does not read, io_error (exit 1) for one that cannot be read.
model_dir_model read_model_dir_model(const std::string& dir, const maybe<model_desc>& model = {});

/// vLLM's check of the `quantization` argument against a quantized checkpoint (config/model.py
/// _verify_quantization): the methods that override it (gpt-oss's MXFP4, ModelOpt) take any value;
/// for the others it must be absent or the checkpoint's quant_method. Throws config_error with vLLM's text.
void check_quantization_argument(const source::checkpoint_source& checkpoint, const maybe<std::string>& quantization);

/// The whole of `plan --model-dir` for a quantized directory: the request resolved, its plan for the
/// directory's layers, composed with the checkpoint in the request's release.
composed_plan plan_quantized_model_dir(const model_dir_model& dir, const config_request& request, const plan_options& options = {});

}  // namespace qpolicy
