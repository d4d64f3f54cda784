#pragma once
// Checkpoint conversion (`qpolicy quantize`): a bf16/fp16/fp32 safetensors checkpoint (files, an index,
// or a Hugging Face model directory) in, an FP8 checkpoint out (vLLM's fp8 format or compressed-tensors'
// float-quantized one; a whole model directory for a directory), each planned weight quantized with its
// layer's scheme exactly as vLLM's online path computes it, everything else copied byte for byte.
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "qpolicy/io/json_front.hpp"
#include "qpolicy/io/detail/paths.hpp"
#include "qpolicy/io/quantize_tensor.hpp"

namespace qpolicy {

/// How the output records its quantization (cli.md `--format`): vLLM's `fp8` checkpoint method
/// (`weight_scale_inv` blocks, `ignored_layers`), compressed-tensors' `float-quantized` format, or the
/// one that loads correctly for the plan's schemes in vLLM and transformers. `quark` and `modelopt` are
/// never asked for: they hold an already-quantized checkpoint's kept layers that compressed-tensors cannot
/// (gpt-oss's fused MXFP4 experts; ModelOpt NVFP4, as MIXED_PRECISION) beside the online ones.
enum class checkpoint_format : std::uint8_t { automatic, vllm_fp8, compressed_tensors, quark, modelopt };

std::string_view to_string(checkpoint_format f);

/// What to convert and how.
struct checkpoint_request {
  std::vector<std::string> inputs;  // .safetensors files, one model.safetensors.index.json, or one model directory
  std::string output;               // OUTPUT.safetensors, or the output model directory for a directory input
  std::string config_out;           // quantization_config JSON for config.json, or ""
  std::vector<role_path> also_read;  // other files the caller read (model, config): no output may be one
  resolved_config config;
  /// The `quantization` argument as given (-q): an already-quantized input checks it against the
  /// checkpoint's method, as vLLM does.
  maybe<std::string> quantization;
  maybe<model_desc> model;          // absent: derived from the checkpoint's tensor names
  checkpoint_format format = checkpoint_format::automatic;
  std::uint64_t max_shard_size = 0;  // directory output: bytes per shard; 0 keeps the input's sharding
  /// Directory output: this process's share of the output shards, shard k when k % shard_count ==
  /// shard_index (`--shard I/N`), and whether shards a manifest proves complete are kept (`--resume`).
  unsigned shard_index = 0, shard_count = 1;
  bool resume = false;
  device_kind device = device_kind::cpu;
  unsigned threads = 0;
  /// Called after each tensor is written: input bytes done and in all, tensors done and in all.
  std::function<void(std::uint64_t bytes_done, std::uint64_t bytes_total, std::size_t done, std::size_t total)> progress;
};

/// What the conversion did.
struct checkpoint_summary {
  std::size_t tensors = 0, quantized = 0, copied = 0;
  /// An already-quantized input: weights decoded from the checkpoint's format before quantizing
  /// (counted in `quantized`), the stored tensors their new ones replaced, and the composition in words.
  std::size_t requantized = 0, replaced = 0;
  std::vector<std::string> composition;
  std::uint64_t bytes_in = 0, bytes_out = 0;
  double seconds = 0;
  std::vector<std::string> unmatched;  // tensors that belong to no layer of the model (copied)
  std::string convention;              // how the layer list was found
  checkpoint_format format = checkpoint_format::automatic;  // the format written
  std::vector<std::string> rotations;  // each input rotation the format's transform_config holds, in words
  std::vector<std::string> files_written;                   // directory output: every file, in writing order
  std::size_t shards_total = 0, shards_written = 0, shards_kept = 0, shards_complete = 0;
  bool finished = false;  // directory output: config.json written (by this process)
  std::vector<std::string> warnings;
  std::vector<std::string> notes;      // stale temporaries of dead writers that were removed
};

/// The layer list a checkpoint's tensor names imply (vLLM's default packed mapping, experts
/// `L.N.{gate,up,down}_proj` or `L.N.w1/w2/w3`), and a sentence saying which convention was recognised.
model_desc derive_model(const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& weights,
                        std::string* convention);

/// Converts. Every path is checked before any work (check_run_paths); throws config_error (exit 2) for
/// an invalid config, model, checkpoint, path or shape, io_error (exit 1) for a failed read or write.
/// File output: the output and the config file appear together, only when both were written
/// completely. Directory output (one input that is a model directory): see quantize_model_dir.
checkpoint_summary quantize_checkpoint(const checkpoint_request& request);

/// A Hugging Face model directory in (config.json, and model.safetensors or
/// model.safetensors.index.json with its shards), a directory that vLLM and transformers load out:
/// the quantized shards (the input's file names, or model-0000I-of-0000N.safetensors packed up to
/// max_shard_size), model.safetensors.index.json when the shards need one, config.json with its
/// quantization_config, qpolicy_plan.json, and every other top-level file of the input copied.
/// quantize_checkpoint calls it for a directory input.
///
/// Each shard appears complete or not at all, followed by its manifest (OUT/.qpolicy/SHARD.json: the
/// run it belongs to, its size, its CRC-32C, the input tensors it holds); the copied files, the
/// index, the plan and config.json come last (config.json renamed last), from whichever process
/// finds every shard complete, and then .qpolicy/ goes. A directory without config.json is unfinished.
/// The output must be new or empty, or an unfinished directory of the same conversion (same inputs,
/// plan and options) with `resume` or several `shard_count` processes sharing it. Bad input (exit 2)
/// removes what this run wrote; a failed write or a signal keeps the complete shards for `resume`.
checkpoint_summary quantize_model_dir(const checkpoint_request& request);

/// Completes an unfinished model directory whose shards are all complete (`qpolicy quantize
/// --finalize OUT_DIR`), from its .qpolicy/run.json; config_error naming the missing shards otherwise.
checkpoint_summary finalize_model_dir(const std::string& output_dir);

/// A shard size as transformers' max_shard_size reads it: an integer (bytes) or an integer and a unit,
/// GB/MB/KB (powers of 10), GiB/MiB/KiB (powers of 2), any case, where a lowercase final b means
/// bits ("5Gb" is 625,000,000 bytes). nullopt for anything else, zero, or a size past 2^64.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

}  // namespace qpolicy
