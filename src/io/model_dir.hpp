#pragma once
// Internal to `quantize`: a Hugging Face model directory read (what it holds, what is copied, what is
// not and why), the output's shards, and the JSON files written beside them.
#include <boost/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_files.hpp"
#include "checkpoint_stages.hpp"

namespace qpolicy::checkpoint_io {

/// What a model directory holds, by role.
struct model_dir_inventory {
  std::string dir;
  std::string config_path, config_text;     // config.json, as read
  std::vector<std::string> weight_inputs;  // model.safetensors, or model.safetensors.index.json
  std::vector<std::string> copied;         // other top-level regular files, by name, sorted
  std::vector<std::string> notes;          // what is not copied, and why
  std::optional<boost::json::value> quantization_config;  // config.json's, when the model is quantized
  std::string model_type;                  // config.json's model_type, "" when absent
};

/// Reads `dir`: config.json (a JSON object; with a quantization_config only where `quantized_ok`), the safetensors weights
/// (model.safetensors or model.safetensors.index.json, not both), and the files to copy. Weights in
/// other files (other .safetensors, .bin, .pt, ...) and subdirectories are not copied, with a note.
/// config_error (exit 2) for a directory that is no such model, io_error for one that cannot be read.
model_dir_inventory read_model_dir(const std::string& dir, bool quantized_ok = false);

/// The checkpoint method of a quantized directory's config.json (source::read_checkpoint_source), a
/// refusal naming config.json's path before the field.
source::checkpoint_source checkpoint_source_of(const model_dir_inventory& inv);

/// One output shard: its file name and the range of input tensors (input order) it holds.
struct output_shard {
  std::string file_name;
  std::size_t begin = 0, end = 0;
};

/// The output's shards: the input's files (same names) when `max_size` is 0, else tensors packed in
/// input order into shards of at most `max_size` bytes of tensor data (a larger tensor alone),
/// named model-0000I-of-0000N.safetensors, or model.safetensors when one is enough.
std::vector<output_shard> plan_shards(const checkpoint& ck, const conversion& c, std::uint64_t max_size);

/// Whether the shards need model.safetensors.index.json: more than one, or one not named model.safetensors.
bool needs_index(const std::vector<output_shard>& shards);

/// model.safetensors.index.json as transformers writes it: total_size, then every tensor's shard, sorted.
std::string index_json(const conversion& c, const std::vector<output_shard>& shards);

/// config.json's text with "quantization_config" added as its last key, the rest of the text byte for
/// byte as it was; an already-quantized model's block replaced in place (the file rewritten).
std::string with_quantization_config(const std::string& config_text, const boost::json::object& qc);

/// JSON text as Python's json.dumps(v, indent=2) writes it (transformers' config.json and index
/// files), starting at nesting `level`.
std::string pretty_json(const boost::json::value& v, int level = 0);

}  // namespace qpolicy::checkpoint_io
