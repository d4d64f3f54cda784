// `qpolicy quantize MODEL_DIR -o OUT_DIR`: a Hugging Face model directory in, a directory vLLM and
// transformers load out (model_dir.hpp, checkpoint.hpp).
#include "model_dir.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <limits>
#include <map>

#include "../json/json_text.hpp"
#include "qpolicy/io/io_error.hpp"
#include "qpolicy/io/detail/paths.hpp"

namespace qpolicy {

namespace checkpoint_io {

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

constexpr std::string_view config_name = "config.json", single_name = "model.safetensors",
                           index_name = "model.safetensors.index.json", plan_name = "qpolicy_plan.json";

/// Weight files of other formats (and their indexes): the output holds the quantized weights instead.
bool is_other_weights(std::string_view name) {
  for (std::string_view ext : {".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".bin.index.json",
                               ".pt.index.json", ".pth.index.json", ".msgpack.index.json", ".h5.index.json"})
    if (name.ends_with(ext)) return true;
  return false;
}

std::string join(const std::string& dir, std::string_view name) { return (fs::path(dir) / name).string(); }

}  // namespace

model_dir_inventory read_model_dir(const std::string& dir, bool quantized_ok) {
  model_dir_inventory inv;
  inv.dir = dir;
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) names.push_back(it->path().filename().string());
  if (ec) throw io_error("cannot list the model directory", dir, ec.value());
  std::sort(names.begin(), names.end());
  const auto has = [&](std::string_view n) { return std::binary_search(names.begin(), names.end(), std::string(n)); };

  inv.config_path = join(dir, config_name);
  if (!has(config_name))
    throw config_error("", "the model directory '" + dir + "' has no config.json; expected a Hugging Face model directory");
  inv.config_text = read_input_file(inv.config_path, "the model's config.json");
  const auto doc = json_text::parse(inv.config_text, json_dialect::strict, inv.config_path, nullptr);
  if (!doc.root().is_object())
    throw config_error("", inv.config_path + " is a JSON " + doc.py_type(doc.root()) + "; expected an object (a model's config)");
  if (const auto* type = doc.root().get_object().if_contains("model_type"); type && type->is_string())
    inv.model_type = std::string(type->get_string());
  if (const auto* qc = doc.root().get_object().if_contains("quantization_config")) {
    const auto* method = qc->is_object() ? qc->get_object().if_contains("quant_method") : nullptr;
    if (!quantized_ok)
      throw config_error("", inv.config_path + " already has a quantization_config" +
                                 (method ? " (quant_method " + doc.py_repr(*method) + ")" : std::string()) +
                                 ": the model is quantized; quantize takes a model with bf16, fp16 or fp32 weights (`qpolicy plan "
                                 "--model-dir` shows what vLLM does with it)");
    inv.quantization_config = *qc;
  }

  if (has(single_name) && has(index_name))
    throw config_error("", "the model directory '" + dir + "' has both model.safetensors and model.safetensors.index.json; "
                           "transformers would load the one and vLLM the other: remove the one that is not the model");
  if (has(index_name)) inv.weight_inputs.push_back(join(dir, index_name));
  else if (has(single_name)) inv.weight_inputs.push_back(join(dir, single_name));
  else
    throw config_error("", "the model directory '" + dir + "' has no model.safetensors or model.safetensors.index.json" +
                               (has("pytorch_model.bin") || has("pytorch_model.bin.index.json")
                                    ? std::string("; it has PyTorch .bin weights, and quantize reads safetensors")
                                    : std::string("; expected a Hugging Face model directory with safetensors weights")));
  std::vector<std::string> shard_names;  // the index's shards (base names), read again by the caller
  if (has(index_name)) {
    std::vector<std::string> warnings;
    for (const auto& shard : read_index(inv.weight_inputs.front(), warnings).shards)
      shard_names.push_back(fs::path(shard).filename().string());
  }

  for (const auto& name : names) {
    if (name == config_name || name == single_name || name == index_name ||
        std::find(shard_names.begin(), shard_names.end(), name) != shard_names.end())
      continue;
    struct stat st {};
    const auto path = join(dir, name);
    if (::stat(path.c_str(), &st) != 0) throw io_error("cannot read", path, errno);
    if (S_ISDIR(st.st_mode)) inv.notes.push_back("not copied: the directory '" + name + "' (only the model directory's files are)");
    else if (!S_ISREG(st.st_mode)) inv.notes.push_back("not copied: '" + name + "', which is not a regular file");
    else if (name.ends_with(".safetensors"))
      inv.notes.push_back("not copied: '" + name + "', safetensors weights that are not the model's (vLLM would load them)");
    else if (is_other_weights(name)) inv.notes.push_back("not copied: '" + name + "', weights in another format");
    else inv.copied.push_back(name);
  }
  return inv;
}

std::vector<output_shard> plan_shards(const checkpoint& ck, const conversion& c, std::uint64_t max_size) {
  std::vector<output_shard> shards;
  // Output bytes per input tensor: the tensor, or a member's codes and scales.
  std::vector<std::uint64_t> bytes;
  for (std::size_t i = 0; i < ck.order.size(); ++i) {
    std::uint64_t b = 0;
    for (const auto& s : c.layout.specs_of(i, i + 1)) b += s.bytes();
    bytes.push_back(b);
  }
  if (max_size == 0) {
    for (std::size_t i = 0; i < ck.order.size(); ++i)
      if (i == 0 || ck.order[i].file != ck.order[i - 1].file)
        shards.push_back({fs::path(ck.order[i].file->path()).filename().string(), i, i + 1});
      else
        shards.back().end = i + 1;
    return shards;
  }
  std::uint64_t filled = 0;
  for (std::size_t i = 0; i < ck.order.size(); ++i) {
    if (shards.empty() || (filled > 0 && filled + bytes[i] > max_size)) {
      shards.push_back({{}, i, i});
      filled = 0;
    }
    shards.back().end = i + 1;
    filled += bytes[i];
  }
  if (shards.size() == 1) shards.front().file_name = std::string(single_name);
  else {
    for (std::size_t k = 0; k < shards.size(); ++k) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
      shards[k].file_name = name;
    }
  }
  return shards;
}

bool needs_index(const std::vector<output_shard>& shards) {
  return shards.size() > 1 || (shards.size() == 1 && shards.front().file_name != single_name);
}

std::string pretty_json(const json::value& v, int level) {
  const std::string pad(static_cast<std::size_t>(2 * (level + 1)), ' '), close(static_cast<std::size_t>(2 * level), ' ');
  if (v.is_object()) {
    const auto& o = v.get_object();
    if (o.empty()) return "{}";
    std::string out = "{\n";
    bool first = true;
    for (const auto& kv : o) {
      out += (first ? "" : ",\n") + pad + json_text::serialize(json::string(kv.key())) + ": " + pretty_json(kv.value(), level + 1);
      first = false;
    }
    return out + "\n" + close + "}";
  }
  if (v.is_array()) {
    const auto& a = v.get_array();
    if (a.empty()) return "[]";
    std::string out = "[\n";
    for (std::size_t i = 0; i < a.size(); ++i) out += (i ? ",\n" : "") + pad + pretty_json(a[i], level + 1);
    return out + "\n" + close + "]";
  }
  return json_text::serialize(v);
}

source::checkpoint_source checkpoint_source_of(const model_dir_inventory& inv) {
  if (!inv.quantization_config) throw std::logic_error("checkpoint_source_of takes a quantized model directory");
  try {
    return source::read_checkpoint_source(*inv.quantization_config, inv.model_type);
  } catch (const config_error& e) {
    throw config_error(inv.config_path, e.diag().text());
  }
}

std::string with_quantization_config(const std::string& config_text, const json::object& qc) {
  // An already-quantized model's config: the block replaced where it stands, the file written again as
  // transformers writes it.
  if (auto doc = json::parse(config_text); doc.is_object() && doc.as_object().contains("quantization_config")) {
    doc.as_object()["quantization_config"] = qc;
    return pretty_json(doc) + "\n";
  }
  // The text is a JSON object (read_model_dir parsed it): its last '}' closes it.
  const auto is_space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; };
  std::size_t close = config_text.size();
  while (close > 0 && is_space(config_text[close - 1])) --close;
  --close;  // the '}'
  std::size_t last = close;
  while (last > 0 && is_space(config_text[last - 1])) --last;
  const bool empty = config_text[last - 1] == '{';
  return config_text.substr(0, last) + (empty ? "\n" : ",\n") + "  \"quantization_config\": " + pretty_json(qc, 1) + "\n" +
         config_text.substr(close);
}

/// model.safetensors.index.json as transformers writes it: total_size, then every tensor's shard, sorted.
std::string index_json(const conversion& c, const std::vector<output_shard>& shards) {
  std::map<std::string, std::string> where;
  std::uint64_t total = 0;
  for (const auto& shard : shards)
    for (const auto& s : c.layout.specs_of(shard.begin, shard.end)) {
      total += s.bytes();
      where[s.name] = shard.file_name;
    }
  json::object weight_map;
  for (const auto& [tensor, file] : where) weight_map[tensor] = file;
  return pretty_json(json::object{{"metadata", json::object{{"total_size", total}}}, {"weight_map", weight_map}}) + "\n";
}

}  // namespace checkpoint_io

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 20) return std::nullopt;
  std::string unit(text.substr(digits));
  const bool bits = !unit.empty() && unit.back() == 'b' && unit.size() == 2;
  for (auto& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  std::uint64_t scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KB") scale = 1000;
  else if (unit == "MB") scale = 1000 * 1000;
  else if (unit == "GB") scale = 1000 * 1000 * 1000;
  else if (unit == "KIB") scale = 1ull << 10;
  else if (unit == "MIB") scale = 1ull << 20;
  else if (unit == "GIB") scale = 1ull << 30;
  else return std::nullopt;
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const std::uint64_t d = static_cast<std::uint64_t>(text[i] - '0');
    if (n > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return std::nullopt;
    n = n * 10 + d;
  }
  if (n > std::numeric_limits<std::uint64_t>::max() / scale) return std::nullopt;
  n *= scale;
  if (bits) n /= 8;
  if (n == 0) return std::nullopt;
  return n;
}

}  // namespace qpolicy
