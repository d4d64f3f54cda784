#pragma once
// The `hostile` suite's tools: crafted files, a run of the qpolicy executable (with a time limit, so a
// hang is a failure and not a stuck CI), a fingerprint of every file in a directory (inputs must come
// out unchanged, and a refused run must leave nothing new), and the checks every case makes.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../support/process.hpp"
#include "../support/temp_dir.hpp"

namespace hostile {

namespace fs = std::filesystem;
using qpolicy::test::process_result;
using qpolicy::test::temp_dir;

inline std::string exe() {
  const char* e = std::getenv("QPOLICY_EXE");
  REQUIRE(e);
  return e;
}

/// Runs `qpolicy ARGS...` with a 60 s limit (a hang fails the case instead of the whole suite).
inline process_result run_qpolicy(std::vector<std::string> args, double timeout = 60) {
  args.insert(args.begin(), exe());
  return qpolicy::test::run_process(args, timeout);
}

/// Runs `qpolicy ARGS...` under a file size limit of `kib` KiB (bash's ulimit -f).
inline process_result qpolicy_with_size_limit(unsigned kib, const std::vector<std::string>& args) {
  std::string cmd = "ulimit -f " + std::to_string(kib) + "; exec \"$0\"";
  for (std::size_t i = 0; i < args.size(); ++i) cmd += " \"$" + std::to_string(i + 1) + "\"";
  std::vector<std::string> argv{"/bin/bash", "-c", cmd, exe()};
  argv.insert(argv.end(), args.begin(), args.end());
  return qpolicy::test::run_process(argv, 60);
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A safetensors file from its header text (padded to 8) and data bytes.
inline std::string safetensors(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[static_cast<std::size_t>(i)] = static_cast<char>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  return len + header + data;
}

/// A small valid bf16 checkpoint: a fused q/k/v, an o_proj, an lm_head (values 1.0 .. 1.875).
inline std::string small_checkpoint() {
  std::string data;
  for (int i = 0; i < 4 * 16 * 4 + 2 * 16; ++i) data += std::string{static_cast<char>(0x80 | ((i % 8) << 4)), 0x3f};
  return safetensors(R"({"m.layers.0.self_attn.q_proj.weight": {"dtype": "BF16", "shape": [4, 16], "data_offsets": [0, 128]},
    "m.layers.0.self_attn.k_proj.weight": {"dtype": "BF16", "shape": [4, 16], "data_offsets": [128, 256]},
    "m.layers.0.self_attn.v_proj.weight": {"dtype": "BF16", "shape": [4, 16], "data_offsets": [256, 384]},
    "m.layers.0.self_attn.o_proj.weight": {"dtype": "BF16", "shape": [4, 16], "data_offsets": [384, 512]},
    "lm_head.weight": {"dtype": "BF16", "shape": [2, 16], "data_offsets": [512, 576]}})", data);
}

/// Every entry of a directory: name -> its type and contents ("fifo", "dir", "link:TARGET", or bytes).
using listing = std::map<std::string, std::string>;
inline listing list(const fs::path& dir) {
  listing out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if (e.is_symlink()) out[name] = "link:" + fs::read_symlink(e.path()).string();
    else if (e.is_fifo()) out[name] = "fifo";
    else if (e.is_directory()) out[name] = "dir";
    else out[name] = read_file(e.path());
  }
  return out;
}

/// Names in `after` that are new or changed relative to `before`.
inline std::vector<std::string> changes(const listing& before, const listing& after) {
  std::vector<std::string> out;
  for (const auto& [name, bytes] : after)
    if (auto it = before.find(name); it == before.end() || it->second != bytes) out.push_back(name);
  for (const auto& [name, bytes] : before)
    if (!after.count(name)) out.push_back(name + " (removed)");
  return out;
}

/// A refused run: the exit status, the message on stderr, and the directory exactly as before.
inline void check_refused(const process_result& r, int status, const std::string& message, const fs::path& dir,
                          const listing& before) {
  INFO("stderr: " << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.status == status);
  CHECK_THAT(r.err, Catch::Contains(message));
  const auto changed = changes(before, list(dir));
  INFO("changed: " << Catch::Detail::stringify(changed));
  CHECK(changed.empty());
}

}  // namespace hostile
