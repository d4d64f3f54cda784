#include "checkpoint_files.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

#include "../json/json_text.hpp"
#include "qpolicy/io/detail/paths.hpp"

namespace qpolicy::checkpoint_io {

namespace fs = std::filesystem;
namespace st = safetensors;
using json_text::sv;

checkpoint_index read_index(const std::string& path, std::vector<std::string>& warnings) {
  checkpoint_index index{path, {}, {}};
  std::vector<json_text::duplicate_key> dups;
  const auto parsed = json_text::parse(read_input_file(path, "the checkpoint index"), json_dialect::strict, path, &dups);
  const auto& doc = parsed.root();
  // Python's json (transformers, vLLM) keeps the last value of a duplicate key; so does this reader, and says so.
  for (const auto& d : dups)
    warnings.push_back(path + ": duplicate key " + text::py_repr(d.key) + (d.loc.empty() ? std::string() : " in " + d.loc) +
                       " (the last value is used, as Python's json does)");
  const auto* map = doc.is_object() ? doc.get_object().if_contains("weight_map") : nullptr;
  if (!map || !map->is_object()) throw config_error("", path + ": the index has no \"weight_map\" object");
  std::set<std::string> shards;
  for (const auto& kv : map->get_object()) {
    if (!kv.value().is_string()) throw config_error("", path + ": weight_map[" + text::py_repr(sv(kv.key())) + "] is not a file name");
    const std::string file(sv(kv.value().get_string()));
    const fs::path rel(file);
    if (file.empty() || rel.is_absolute() || std::find(rel.begin(), rel.end(), fs::path("..")) != rel.end())
      throw config_error("", path + ": weight_map[" + text::py_repr(sv(kv.key())) + "] is " + text::py_repr(file) +
                                 "; expected a shard file in the index's directory");
    const auto shard = (fs::path(path).parent_path() / file).string();
    index.weight_map[std::string(sv(kv.key()))] = shard;
    shards.insert(shard);
  }
  index.shards.assign(shards.begin(), shards.end());
  return index;
}

/// Every weight_map entry must name a tensor its shard holds, and every shard tensor must be in the map.
void check_index(const checkpoint_index& index, const checkpoint& c) {
  std::vector<std::string> missing, unlisted;
  for (const auto& [tensor, shard] : index.weight_map) {
    const auto it = c.by_name.find(tensor);
    if (it == c.by_name.end() || it->second.file->path() != shard) missing.push_back(text::py_repr(tensor) + " in " + shard);
  }
  for (const auto& f : c.files)
    if (std::find(index.shards.begin(), index.shards.end(), f->path()) != index.shards.end())
      for (const auto& t : f->tensors())
        if (auto it = index.weight_map.find(t.name); it == index.weight_map.end() || it->second != f->path())
          unlisted.push_back(text::py_repr(t.name) + " of " + f->path());
  auto list = [](const std::vector<std::string>& v) {
    std::string r;
    for (std::size_t i = 0; i < v.size() && i < 5; ++i) r += (i ? ", " : "") + v[i];
    return v.size() > 5 ? r + " (and " + std::to_string(v.size() - 5) + " more)" : r;
  };
  if (!missing.empty())
    throw config_error("", index.path + ": weight_map names tensors that their shards do not hold: " + list(missing));
  if (!unlisted.empty())
    throw config_error("", index.path + ": shards hold tensors that weight_map does not list: " + list(unlisted));
}

/// Every file the inputs name: the .safetensors given, and each index's shards.
std::vector<std::string> checkpoint_files(const std::vector<std::string>& inputs, std::vector<checkpoint_index>& indexes,
                                          std::vector<std::string>& warnings) {
  std::vector<std::string> paths;
  for (const auto& in : inputs) {
    if (in.size() > 11 && in.ends_with(".index.json")) {
      indexes.push_back(read_index(in, warnings));
      paths.insert(paths.end(), indexes.back().shards.begin(), indexes.back().shards.end());
    } else {
      paths.push_back(in);
    }
  }
  if (paths.empty()) throw config_error("", "no input checkpoint given");
  return paths;
}

checkpoint open_checkpoint(const std::vector<std::string>& paths, const std::vector<checkpoint_index>& indexes) {
  checkpoint c;
  for (const auto& p : paths) {
    c.files.push_back(std::make_unique<st::file>(p));
    for (const auto& t : c.files.back()->tensors()) {
      const tensor_ref r{c.files.back().get(), &t};
      if (!c.by_name.emplace(t.name, r).second)
        throw config_error("", "tensor " + text::py_repr(t.name) + " is in both " + c.by_name[t.name].file->path() + " and " + p);
      c.order.push_back(r);
    }
  }
  for (const auto& index : indexes) check_index(index, c);
  return c;
}

void check_stored_tensors(const checkpoint& ck, const source::checkpoint_source& method, const model_desc& model) {
  std::map<std::string, source::tensor_header> headers;
  for (const auto& t : ck.order) headers.emplace(t.info->name, source::tensor_header{t.info->type, t.info->shape, t.file->path()});
  source::check_stored_tensors(method, model, [&](const std::string& name) -> const source::tensor_header* {
    const auto it = headers.find(name);
    return it == headers.end() ? nullptr : &it->second;
  });
}

}  // namespace qpolicy::checkpoint_io
