#pragma once
// Checkpoint conversion (`qpolicy quantize`): a bf16/fp16/fp32 safetensors checkpoint in, vLLM's FP8
// checkpoint layout out, each planned weight quantized with its layer's scheme exactly as vLLM's
// online path computes it, everything else copied byte for byte.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qpolicy/io/json_front.hpp"
#include "qpolicy/io/paths.hpp"
#include "qpolicy/io/quantize_tensor.hpp"

namespace qpolicy {

/// What to convert and how.
struct checkpoint_request {
  std::vector<std::string> inputs;  // .safetensors files or one model.safetensors.index.json
  std::string output;               // OUTPUT.safetensors
  std::string config_out;           // quantization_config JSON for config.json, or ""
  std::vector<role_path> also_read;  // other files the caller read (model, config): no output may be one
  resolved_config config;
  maybe<model_desc> model;          // absent: derived from the checkpoint's tensor names
  device_kind device = device_kind::cpu;
  unsigned threads = 0;
  std::function<void(std::size_t done, std::size_t total)> progress;  // per tensor written
};

/// What the conversion did.
struct checkpoint_summary {
  std::size_t tensors = 0, quantized = 0, copied = 0;
  std::uint64_t bytes_in = 0, bytes_out = 0;
  double seconds = 0;
  std::vector<std::string> unmatched;  // tensors that belong to no layer of the model (copied)
  std::string convention;              // how the layer list was found
  std::vector<std::string> warnings;
  std::vector<std::string> notes;      // stale temporaries of dead writers that were removed
};

/// The layer list a checkpoint's tensor names imply (vLLM's default packed mapping, experts
/// `L.N.{gate,up,down}_proj` or `L.N.w1/w2/w3`), and a sentence saying which convention was recognised.
model_desc derive_model(const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& weights,
                        std::string* convention);

/// Converts. Every path is checked before any work (check_run_paths); throws config_error (exit 2) for
/// an invalid config, model, checkpoint, path or shape, io_error (exit 1) for a failed read or write.
/// The output and the config file appear together, only when both were written completely.
checkpoint_summary quantize_checkpoint(const checkpoint_request& request);

}  // namespace qpolicy
