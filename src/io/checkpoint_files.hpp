#pragma once
// Internal to `quantize`: the checkpoint's files (the .safetensors given, or an index and its shards),
// the index read and checked against what its shards hold, and every tensor by name.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qpolicy/io/safetensors.hpp"
#include "qpolicy/model/model.hpp"
#include "qpolicy/source/checkpoint_source.hpp"

namespace qpolicy::checkpoint_io {

struct tensor_ref {
  const safetensors::file* file = nullptr;
  const safetensors::tensor_info* info = nullptr;
};

/// The opened checkpoint: every tensor by name, in file and data order.
struct checkpoint {
  std::vector<std::unique_ptr<safetensors::file>> files;
  std::vector<tensor_ref> order;
  std::map<std::string, tensor_ref> by_name;
};

/// The shard files a model.safetensors.index.json names, and its weight_map (tensor -> shard path).
struct checkpoint_index {
  std::string path;
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> shards;  // sorted, each once
};


/// Reads an index; a duplicate key is a warning (the last value wins, as with Python's json).
checkpoint_index read_index(const std::string& path, std::vector<std::string>& warnings);
/// Every weight_map entry must name a tensor its shard holds, and every shard tensor must be in the map.
void check_index(const checkpoint_index& index, const checkpoint& c);
/// Every file the inputs name: the .safetensors given, and each index's shards.
std::vector<std::string> checkpoint_files(const std::vector<std::string>& inputs, std::vector<checkpoint_index>& indexes,
                                          std::vector<std::string>& warnings);
/// Opens every file; a tensor in two files is an error; each index is checked against its shards.
checkpoint open_checkpoint(const std::vector<std::string>& paths, const std::vector<checkpoint_index>& indexes);
/// source::check_stored_tensors over the opened files' headers: every module the checkpoint's method
/// quantizes stored as its format says, a mismatch naming the tensor and its file.
void check_stored_tensors(const checkpoint& ck, const source::checkpoint_source& method, const model_desc& model);

}  // namespace qpolicy::checkpoint_io
