#pragma once
// For the end-to-end quantize targets: one run of quantize_checkpoint in a private directory, with the
// invariants of "never lose data" checked after it: every input unchanged, and after a refusal nothing
// but the inputs in the directory. A violated invariant aborts (a finding).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "qpolicy/io/checkpoint.hpp"
#include "qpolicy/io/io_error.hpp"

namespace qpolicy::fuzz {

namespace fs = std::filesystem;

/// A directory of this process's own on tmpfs where there is one (fuzzing writes a file per input),
/// removed with its contents when the process exits.
inline const fs::path& run_dir() {
  struct owned_dir {
    fs::path path;
    owned_dir() {
      const fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
      path = base / ("qpolicy-fuzz-" + std::to_string(::getpid()));
      fs::create_directories(path);
    }
    ~owned_dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const owned_dir d;
  return d.path;
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void put(const fs::path& p, std::string_view bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "finding: %s\n", what.c_str());
  std::abort();
}

/// A file's bytes, or a directory's files (names and bytes, in name order).
inline std::string snapshot(const fs::path& p) {
  if (!fs::is_directory(p)) return slurp(p);
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(p)) files[e.path().string()] = e.is_directory() ? "/" : slurp(e.path());
  std::string out;
  for (const auto& [name, bytes] : files) out += name + '\0' + std::to_string(bytes.size()) + '\0' + bytes;
  return out;
}

/// Runs quantize on `request` (inputs in run_dir()); `inputs` are the files (or model directories) that
/// must stay unchanged.
inline void quantize_and_check(checkpoint_request request, const std::set<std::string>& inputs) {
  std::map<std::string, std::string> before;
  for (const auto& name : inputs) before[name] = snapshot(run_dir() / name);
  bool ok = false;
  try {
    (void)quantize_checkpoint(request);
    ok = true;
  } catch (const config_error&) {
  } catch (const io_error&) {  // a shard the index names may be missing: exit 1, and still nothing left
  }
  for (const auto& [name, bytes] : before)
    if (snapshot(run_dir() / name) != bytes) finding("input " + name + " changed");
  for (const auto& e : fs::directory_iterator(run_dir())) {
    const auto name = e.path().filename().string();
    if (inputs.count(name)) continue;
    if (!ok) finding("a refused run left " + name + " behind");
    if (name.find(".qpolicy-tmp-") != std::string::npos) finding("a successful run left " + name + " behind");
    fs::remove_all(e.path());
  }
}

}  // namespace qpolicy::fuzz
