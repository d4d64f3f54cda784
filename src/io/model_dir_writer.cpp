// `qpolicy quantize MODEL_DIR -o OUT_DIR [--shard I/N] [--resume]` and `--finalize OUT_DIR`: the
// output directory's protocol (checkpoint.hpp, quantize_model_dir). The state of an unfinished
// directory lives in OUT_DIR/.qpolicy/: run.json (what every process of the conversion agrees on, the
// final files' texts among it) and one manifest per complete shard.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <filesystem>

#include "../json/json_text.hpp"
#include "checkpoint_format.hpp"
#include "crc32c.hpp"
#include "model_dir.hpp"
#include "qpolicy/io/io_error.hpp"
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/io/detail/paths.hpp"
#include "qpolicy/io/detail/staged_output.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/source/checkpoint_source.hpp"

namespace qpolicy {

namespace checkpoint_io {

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using json_text::sv;

constexpr std::string_view state_name = ".qpolicy", config_name = "config.json", index_name = "model.safetensors.index.json",
                           plan_name = "qpolicy_plan.json", version = "qpolicy 0.1.0";

std::string join(const std::string& dir, std::string_view name) { return (fs::path(dir) / name).string(); }
std::string state_path(const std::string& out, std::string_view name = {}) {
  return name.empty() ? join(out, state_name) : join(join(out, state_name), name);
}
std::string manifest_name(const std::string& shard) { return shard + ".json"; }

/// What every process of one conversion agrees on (.qpolicy/run.json): the run's id (a digest of its
/// inputs, plan and options), the model directory, the shards, the files to copy, and the final
/// files' texts, so that --finalize needs nothing else.
struct run_state {
  std::string run_id, model_dir;
  std::vector<std::string> shards, copied;
  std::string config_text, index_text, plan_text;  // index_text empty: the shards need no index
};

std::string to_json(const run_state& r) {
  json::array shards, copied;
  for (const auto& s : r.shards) shards.emplace_back(s);
  for (const auto& c : r.copied) copied.emplace_back(c);
  return pretty_json(json::object{{"run_id", r.run_id},         {"written_by", version},      {"model_dir", r.model_dir},
                                  {"shards", shards},           {"copied", copied},           {"config.json", r.config_text},
                                  {"index", r.index_text},      {"qpolicy_plan.json", r.plan_text}}) +
         "\n";
}

/// A JSON object file of the state directory; config_error when it is damaged.
json::object read_state_file(const std::string& path) {
  const auto doc = json_text::parse(read_input_file(path, "qpolicy's state file"), json_dialect::strict, path, nullptr);
  if (!doc.root().is_object()) throw config_error("", path + " is damaged: expected a JSON object");
  return doc.root().get_object();
}

std::string string_field(const json::object& o, std::string_view key, const std::string& path) {
  const auto* v = o.if_contains(key);
  if (!v || !v->is_string()) throw config_error("", path + " is damaged: no \"" + std::string(key) + "\" string");
  return std::string(sv(v->get_string()));
}

run_state read_run(const std::string& out) {
  const auto path = state_path(out, "run.json");
  const auto o = read_state_file(path);
  run_state r;
  r.run_id = string_field(o, "run_id", path);
  r.model_dir = string_field(o, "model_dir", path);
  r.config_text = string_field(o, "config.json", path);
  r.index_text = string_field(o, "index", path);
  r.plan_text = string_field(o, "qpolicy_plan.json", path);
  for (const char* key : {"shards", "copied"}) {
    const auto* a = o.if_contains(key);
    if (!a || !a->is_array()) throw config_error("", path + " is damaged: no \"" + std::string(key) + "\" list");
    for (const auto& v : a->get_array()) {
      if (!v.is_string()) throw config_error("", path + " is damaged: \"" + std::string(key) + "\" holds a non-string");
      (std::string_view(key) == "shards" ? r.shards : r.copied).emplace_back(sv(v.get_string()));
    }
  }
  return r;
}

/// Writes a whole file, all or nothing.
void write_whole(const std::string& path, std::string_view text) {
  output_transaction tx;
  tx.stage(path).write(text);
  tx.commit();
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

/// A shard is complete when its manifest belongs to this run and the file has the manifest's size
/// (the shard is renamed into place only when complete, and its manifest only after that).
bool shard_complete(const std::string& out, const run_state& run, const std::string& shard) {
  const auto manifest = state_path(out, manifest_name(shard));
  struct stat st {};
  if (::stat(manifest.c_str(), &st) != 0 || ::stat(join(out, shard).c_str(), &st) != 0) return false;
  const auto o = read_state_file(manifest);
  if (string_field(o, "run_id", manifest) != run.run_id) return false;
  const auto* bytes = o.if_contains("bytes");
  if (!bytes || !bytes->is_number()) return false;
  std::error_code ec;
  const auto size = bytes->to_number<std::uint64_t>(ec);
  return !ec && size == static_cast<std::uint64_t>(st.st_size);
}

/// Copies a regular file into a staged output, a bounded buffer at a time.
void copy_file(const std::string& from, staged_file& to) {
  const int fd = ::open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw io_error("cannot read", from, errno);
  std::vector<std::byte> buffer(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw io_error("error while reading", from, err);
    }
    try {
      to.write(std::span(buffer.data(), static_cast<std::size_t>(n)));
    } catch (...) {
      ::close(fd);
      throw;
    }
  }
  ::close(fd);
}

/// Holds the state directory's lock while alive (flock: released when the process ends, however).
class state_lock {
 public:
  explicit state_lock(const std::string& out) {
    const auto path = state_path(out, "lock");
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      if (errno == ENOENT) return;  // the state is gone: another process has just finished the directory
      throw io_error("cannot open the lock file", path, errno);
    }
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) throw io_error("cannot lock", path, errno);
  }
  ~state_lock() {
    if (fd_ >= 0) ::close(fd_);
  }
  /// False when the state directory was gone (the caller finds config.json then).
  bool held() const { return fd_ >= 0; }
  state_lock(const state_lock&) = delete;
  state_lock& operator=(const state_lock&) = delete;

 private:
  int fd_ = -1;
};

/// Finishes `out` when every shard is complete: the copied files, then the index, the plan and
/// config.json (renamed last), then the state directory goes. Under the state lock, so that of the
/// processes finishing together one does it. Returns whether the directory is finished (by this call
/// or an earlier one); counts complete shards into `sum`.
bool try_finish(const std::string& out, const run_state& run, checkpoint_summary& sum) {
  {
    state_lock lock(out);
    if (exists(join(out, config_name))) return true;
    if (!lock.held()) throw io_error("cannot lock", state_path(out, "lock"), ENOENT);
    sum.shards_complete = 0;
    for (const auto& shard : run.shards) sum.shards_complete += shard_complete(out, run, shard);
    if (sum.shards_complete < run.shards.size()) return false;
    for (const auto& name : run.copied) {
      output_transaction tx;
      copy_file(join(run.model_dir, name), tx.stage(join(out, name)));
      tx.commit();
      sum.files_written.push_back(join(out, name));
    }
    output_transaction last;
    if (!run.index_text.empty()) last.stage(join(out, index_name)).write(run.index_text);
    last.stage(join(out, plan_name)).write(run.plan_text);
    last.stage(join(out, config_name)).write(run.config_text);
    last.commit();
    for (const auto name : {index_name, plan_name, config_name})
      if (name != index_name || !run.index_text.empty()) sum.files_written.push_back(join(out, name));
    sum.finished = true;
  }
  // The state goes (the lock file last: a process waiting on it then finds config.json).
  for (const auto& shard : run.shards) ::unlink(state_path(out, manifest_name(shard)).c_str());
  ::unlink(state_path(out, "run.json").c_str());
  ::unlink(state_path(out, "lock").c_str());
  ::rmdir(state_path(out).c_str());
  return true;
}

/// The digest that names a conversion: the inputs (names, sizes, modification times), the plan, the
/// final files (format, index) and the shards, and the writer's version.
std::string run_digest(const run_state& r, const checkpoint& ck) {
  std::string text(version);
  for (const auto& f : ck.files) {
    struct stat st {};
    ::stat(f->path().c_str(), &st);
    text += fmt::format("\n{} {} {}.{}", fs::path(f->path()).filename().string(), st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  }
  for (const auto* part : {&r.config_text, &r.index_text, &r.plan_text}) text += "\n" + *part;
  for (const auto& s : r.shards) text += "\n" + s;
  return fmt::format("{:08x}", crc32c(0, std::as_bytes(std::span(text.data(), text.size()))));
}

/// What an existing output directory holds.
enum class found { nothing, finished_same, unfinished_same };

/// Checks the output directory before any work (config_error naming what is wrong) and says what is
/// there; a missing one's parent must exist (io_error).
found check_output(const std::string& out, const std::string& input_dir, const run_state& run, const checkpoint_request& req) {
  struct stat in {}, st {};
  if (::stat(input_dir.c_str(), &in) != 0) throw io_error("cannot read the model directory", input_dir, errno);
  if (::stat(out.c_str(), &st) != 0) {
    if (errno != ENOENT) throw io_error("cannot check -o", out, errno);
    check_parent_directory(out, "-o");
    return found::nothing;
  }
  if (!S_ISDIR(st.st_mode))
    throw config_error("", "-o '" + out + "' exists and is not a directory; a model directory input is written to a new or empty "
                           "output directory");
  if (st.st_dev == in.st_dev && st.st_ino == in.st_ino)
    throw config_error("", "-o '" + out + "' is the model directory '" + input_dir + "' itself; writing there would destroy the input");
  if (exists(join(out, config_name))) {
    if (!exists(state_path(out, "run.json")) && read_input_file(join(out, config_name), "config.json") == run.config_text &&
        (run.index_text.empty() || (exists(join(out, index_name)) && read_input_file(join(out, index_name), "the index") == run.index_text)))
      return found::finished_same;
    throw config_error("", "-o '" + out + "' is a model directory already (it has a config.json); quantize writes a new one (give a "
                           "new path or an empty directory)");
  }
  if (exists(state_path(out, "run.json"))) {
    const auto earlier = read_run(out);
    if (earlier.run_id != run.run_id)
      throw config_error("", "-o '" + out + "' holds an unfinished conversion with other inputs or options (run " + earlier.run_id +
                             ", this one is " + run.run_id + "); remove it to start over");
    if (!req.resume && req.shard_count == 1)
      throw config_error("", "-o '" + out + "' holds an unfinished conversion of this model with these options; --resume finishes it, "
                             "keeping its complete shards");
    return found::unfinished_same;
  }
  // Processes of a sharded run may find the directory a moment after another made it.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec))
    if (!(req.shard_count > 1 && e.path().filename() == state_name))
      throw config_error("", "-o '" + out + "' is a directory that is not empty; quantize writes a new model directory (give a new "
                             "path or an empty directory)");
  if (ec) throw io_error("cannot list", out, ec.value());
  return found::nothing;
}

/// An already-quantized model directory's quantization (nullopt for a bf16 one): its checkpoint method
/// read, and the model dtype its decoded weights take, as vLLM picks it (config.json's dtype, or
/// torch_dtype; float32 and none become bfloat16, as vLLM's dtype "auto" does).
std::optional<quantized_input> quantized_input_of(const model_dir_inventory& inv) {
  if (!inv.quantization_config) return std::nullopt;
  quantized_input in;
  in.source = checkpoint_source_of(inv);
  in.config = inv.quantization_config->as_object();
  const auto doc = json::parse(inv.config_text).as_object();
  const json::value* d = nullptr;
  std::string key;
  for (const char* k : {"dtype", "torch_dtype"})
    if (const auto* v = doc.if_contains(k); v && v->is_string()) {
      d = v, key = k;
      break;
    }
  const std::string name = d ? std::string(d->get_string()) : std::string();
  if (name == "float16") {
    in.dtype = element::f16;
  } else if (name == "bfloat16" || name == "float32" || name.empty()) {
    in.dtype = element::bf16;
  } else {
    throw config_error("", inv.config_path + " says " + key + " " + text::py_repr(name) + "; expected bfloat16, float16 or float32");
  }
  in.dtype_source = name.empty() ? "bfloat16 (config.json names no dtype; vLLM's \"auto\" takes bfloat16)"
                                 : name == "float32" ? "bfloat16 (config.json's float32, which vLLM's \"auto\" runs as bfloat16)"
                                                     : name + " (config.json's " + key + ")";
  return in;
}

void make_directory(const std::string& path, bool shared) {
  if (::mkdir(path.c_str(), 0777) == 0 || (errno == EEXIST && shared)) return;
  throw io_error("cannot create the directory", path, errno);
}

}  // namespace

}  // namespace checkpoint_io

checkpoint_summary quantize_model_dir(const checkpoint_request& req) {
  using namespace checkpoint_io;
  const auto start = std::chrono::steady_clock::now();
  checkpoint_summary sum;
  if (req.inputs.size() != 1) throw config_error("", "a model directory is converted alone; got " + std::to_string(req.inputs.size()) + " inputs");
  if (!req.config_out.empty())
    throw config_error("", "--config-out is for file outputs; a model directory output has the quantization_config in its config.json");
  if (req.shard_count == 0 || req.shard_index >= req.shard_count)
    throw config_error("", fmt::format("--shard {}/{}: expected I/N with 0 <= I < N", req.shard_index, req.shard_count));
  const auto inv = read_model_dir(req.inputs.front(), true);
  sum.notes = inv.notes;
  std::vector<checkpoint_index> indexes;
  const auto files = checkpoint_files(inv.weight_inputs, indexes, sum.warnings);
  std::vector<role_path> read_paths{{inv.config_path, "the model's config.json"}};
  for (const auto& index : indexes) read_paths.push_back({index.path, "the checkpoint index"});
  for (const auto& f : files) read_paths.push_back({f, "the input"});
  for (const auto& name : inv.copied) read_paths.push_back({join(inv.dir, name), "a file of the model directory"});
  for (const auto& f : req.also_read) read_paths.push_back(f);
  check_run_paths(read_paths, {});
  const auto ck = open_checkpoint(files, indexes);
  const auto c = prepare_conversion(ck, req, sum, quantized_input_of(inv));
  const auto shards = plan_shards(ck, c, req.max_shard_size);

  run_state run;
  run.model_dir = fs::absolute(inv.dir).lexically_normal().string();
  for (const auto& s : shards) run.shards.push_back(s.file_name);
  run.copied = inv.copied;
  run.config_text = with_quantization_config(inv.config_text, conversion_config(c));
  if (needs_index(shards)) run.index_text = index_json(c, shards);
  run.plan_text = conversion_plan_json(c);
  run.run_id = run_digest(run, ck);
  sum.shards_total = shards.size();

  const std::string& out = req.output;
  const auto state = check_output(out, inv.dir, run, req);
  if (state == found::finished_same) {
    sum.notes.push_back("'" + out + "' is finished already: this conversion's config.json is there");
    sum.finished = true;
    sum.shards_complete = shards.size();
    return sum;
  }
  const bool sharing = req.shard_count > 1;
  const bool created = state == found::nothing && !exists(out);
  if (state == found::nothing) make_directory(out, sharing || !created);
  make_directory(state_path(out), true);
  std::vector<std::string> written;  // this run's shards and manifests
  try {
    write_whole(state_path(out, "run.json"), to_json(run));
    tensor_streamer streamer(ck, c, req, sum);
    for (std::size_t k = 0; k < shards.size(); ++k) {
      const auto& shard = shards[k];
      if (k % req.shard_count != req.shard_index) continue;
      if (req.resume && shard_complete(out, run, shard.file_name)) {
        ++sum.shards_kept;
        continue;
      }
      output_transaction tx;
      auto& file = tx.stage(join(out, shard.file_name));
      const auto specs = c.layout.specs_of(shard.begin, shard.end);
      safetensors::writer w(file, {specs.begin(), specs.end()}, c.layout.metadata);
      streamer.stream(shard.begin, shard.end, w);
      w.finish();
      tx.commit();
      written.push_back(join(out, shard.file_name));
      write_whole(state_path(out, manifest_name(shard.file_name)),
                  pretty_json(json::object{{"run_id", run.run_id},
                                           {"shard", shard.file_name},
                                           {"bytes", file.size()},
                                           {"crc32c", fmt::format("{:08x}", file.crc32c())},
                                           {"first_tensor", ck.order[shard.begin].info->name},
                                           {"last_tensor", ck.order[shard.end - 1].info->name},
                                           {"tensors", shard.end - shard.begin}}) +
                      "\n");
      written.push_back(state_path(out, manifest_name(shard.file_name)));
      sum.files_written.push_back(join(out, shard.file_name));
      ++sum.shards_written;
    }
    try_finish(out, run, sum);
  } catch (const config_error&) {
    // Bad input: nothing of this run is worth keeping. (A failed write or a signal keeps the complete
    // shards, for --resume.)
    for (auto it = written.rbegin(); it != written.rend(); ++it) ::unlink(it->c_str());
    if (created && !sharing) {
      ::unlink(state_path(out, "run.json").c_str());
      ::unlink(state_path(out, "lock").c_str());
      ::rmdir(state_path(out).c_str());
      ::rmdir(out.c_str());
    }
    throw;
  }
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sum;
}

checkpoint_summary finalize_model_dir(const std::string& out) {
  using namespace checkpoint_io;
  checkpoint_summary sum;
  if (!exists(state_path(out, "run.json"))) {
    if (exists(join(out, config_name))) {
      sum.finished = true;
      sum.notes.push_back("'" + out + "' is finished already");
      return sum;
    }
    throw config_error("", "'" + out + "' holds no unfinished conversion (no .qpolicy/run.json); --finalize completes a directory that "
                           "quantize --shard processes wrote");
  }
  const auto run = read_run(out);
  sum.shards_total = run.shards.size();
  if (!try_finish(out, run, sum)) {
    std::string missing;
    std::size_t n = 0;
    for (const auto& shard : run.shards)
      if (!shard_complete(out, run, shard) && n++ < 5) missing += (missing.empty() ? "" : ", ") + shard;
    throw config_error("", fmt::format("'{}' is not complete: {} of {} shards are missing or unfinished ({}{}); run their quantize "
                                       "--shard processes (with --resume) first",
                                       out, n, run.shards.size(), missing, n > 5 ? ", ..." : ""));
  }
  return sum;
}

}  // namespace qpolicy
