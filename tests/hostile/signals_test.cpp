// Hostile suite, interruptions: SIGINT, SIGTERM and SIGHUP midway remove the temporaries and exit with
// 128 + the signal; SIGKILL midway leaves no file that looks complete, and the next run removes the
// dead writer's temporary and says so.
#include <signal.h>

#include <chrono>
#include <map>
#include <thread>

#include "../support/files.hpp"
#include "hostile.hpp"

using namespace hostile;

namespace {

/// A checkpoint big enough that quantizing it takes a while (96 MiB of bf16 in 48 tensors by default),
/// its tensors named layers.FIRST.proj.weight onwards.
std::string slow_checkpoint(int first = 0, int count = 48) {
  std::string header = "{", data;
  const std::int64_t rows = 1024, cols = 1024, bytes = rows * cols * 2;
  std::string tensor(static_cast<std::size_t>(bytes), '\0');
  for (std::size_t i = 0; i < tensor.size(); i += 2) {
    tensor[i] = static_cast<char>(i * 37 / 2);
    tensor[i + 1] = static_cast<char>(0x3c + (i / 2) % 3);
  }
  for (int t = 0; t < count; ++t) {
    header += (t ? ", " : "") + std::string("\"layers.") + std::to_string(first + t) + ".proj.weight\": {\"dtype\": \"BF16\", \"shape\": [1024, 1024], " +
              "\"data_offsets\": [" + std::to_string(t * bytes) + ", " + std::to_string((t + 1) * bytes) + "]}";
    data += tensor;
  }
  return safetensors(header + "}", data);
}

/// The names in `dir` that are neither `keep` nor the input.
std::vector<std::string> leftovers(const fs::path& dir, const std::string& input) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename() != input) out.push_back(e.path().filename().string());
  return out;
}

/// Starts quantize, waits until its output is being written (a temporary appears), then sends `sig`.
qpolicy::test::process_result interrupt(const temp_dir& d, int sig) {
  auto p = qpolicy::test::start_process({exe(), "quantize", "-q", "fp8_per_channel", "--threads", "1", "-o", d / "out.safetensors",
                                         "--config-out", d / "quant_config.json", d / "in.safetensors"});
  const auto start = std::chrono::steady_clock::now();
  bool writing = false;
  while (!writing && std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
    for (const auto& e : fs::directory_iterator(d.path()))
      writing |= e.path().filename().string().find("out.safetensors.") == 0;
    if (!writing) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(p.pid, sig);
  auto r = qpolicy::test::finish_process(p, 60);
  INFO("stderr: " << r.err);
  CHECK(writing);
  return r;
}

}  // namespace

TEST_CASE("SIGINT, SIGTERM and SIGHUP midway: no temporaries, exit 128 + signal", "[hostile][signals]") {
  temp_dir d("hostile-signal");
  write_file(d / "in.safetensors", slow_checkpoint());
  const auto input = read_file(d / "in.safetensors");
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    INFO("signal " << sig);
    const auto r = interrupt(d, sig);
    CHECK(r.status == 128 + sig);
    CHECK(leftovers(d.path(), "in.safetensors").empty());
    CHECK(read_file(d / "in.safetensors") == input);
  }
}

TEST_CASE("SIGKILL midway: nothing looks complete; the next run removes the stale temporary", "[hostile][signals]") {
  temp_dir d("hostile-kill");
  write_file(d / "in.safetensors", slow_checkpoint());
  const auto input = read_file(d / "in.safetensors");
  const auto r = interrupt(d, SIGKILL);
  CHECK(r.status == 128 + SIGKILL);
  const auto left = leftovers(d.path(), "in.safetensors");
  INFO("left: " << Catch::Detail::stringify(left));
  CHECK_FALSE(fs::exists(d / "out.safetensors"));
  CHECK_FALSE(fs::exists(d / "quant_config.json"));
  for (const auto& name : left) CHECK(name.find(".qpolicy-tmp-") != std::string::npos);  // marked, never *.safetensors
  REQUIRE(left.size() == 1);
  // The dead writer's temporary goes at the next run into that directory, with a note.
  const auto next = run_qpolicy({"quantize-tensor", "--key", "fp8_per_token", d / "in.safetensors", "-o", d / "tensors.safetensors"});
  INFO(next.err);
  CHECK(next.status == 0);
  CHECK_THAT(next.err, Catch::Contains("note: removed '" + (d / left.front()) + "', a temporary file left by process") &&
                           Catch::Contains("which is no longer running"));
  CHECK_FALSE(fs::exists(d / left.front()));
  CHECK(read_file(d / "in.safetensors") == input);
}

namespace {

/// A model directory of three 32 MiB shards, and a quantize into `out` interrupted with `sig` once the
/// first output shard is complete (its manifest is in place).
qpolicy::test::process_result interrupt_directory(const temp_dir& d, int sig) {
  const auto in = fs::path(d / "model");
  if (!fs::exists(in)) {
    fs::create_directory(in);
    std::string weight_map;
    for (int s = 0; s < 3; ++s) {
      const auto file = "model-0000" + std::to_string(s + 1) + "-of-00003.safetensors";
      write_file((in / file).string(), slow_checkpoint(16 * s, 16));
      for (int t = 16 * s; t < 16 * (s + 1); ++t)
        weight_map += std::string(weight_map.empty() ? "" : ", ") + "\"layers." + std::to_string(t) + ".proj.weight\": \"" + file + "\"";
    }
    write_file((in / "model.safetensors.index.json").string(), "{\"weight_map\": {" + weight_map + "}}");
    write_file((in / "config.json").string(), "{\"model_type\": \"llama\"}");
  }
  auto p = qpolicy::test::start_process({exe(), "quantize", "-q", "fp8_per_channel", "--threads", "1", in.string(), "-o", d / "out"});
  const auto start = std::chrono::steady_clock::now();
  const auto first = fs::path(d / "out") / ".qpolicy" / "model-00001-of-00003.safetensors.json";  // shard 1 complete
  while (!fs::exists(first) && std::chrono::steady_clock::now() - start < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  CHECK(fs::exists(first));
  ::kill(p.pid, sig);
  auto r = qpolicy::test::finish_process(p, 60);
  INFO("stderr: " << r.err);
  return r;
}

}  // namespace

/// The names in `dir` (recursively) that hold a temporary's marker.
std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".qpolicy-tmp-") != std::string::npos) out.push_back(e.path().string());
  return out;
}

using qpolicy::test::tree;

TEST_CASE("a model directory output interrupted or killed midway is unfinished, and --resume finishes it", "[hostile][signals][dir]") {
  temp_dir d("hostile-signal-dir");
  const auto out = fs::path(d / "out");
  const auto fresh = fs::path(d / "fresh");
  REQUIRE(run_qpolicy({"quantize", "-q", "fp8_per_channel", d / "model"}).status != 0);  // no -o: usage
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGKILL}) {
    INFO("signal " << sig);
    fs::remove_all(out);
    const auto r = interrupt_directory(d, sig);
    CHECK(r.status == 128 + sig);
    // Nothing looks complete: no config.json or index; no temporary left by a signal the process saw.
    CHECK_FALSE(fs::exists(out / "config.json"));
    CHECK_FALSE(fs::exists(out / "model.safetensors.index.json"));
    if (sig != SIGKILL) CHECK(temporaries(out).empty());
    CHECK(fs::exists(out / ".qpolicy" / "model-00001-of-00003.safetensors.json"));
    // The next plain run refuses it; --resume keeps the complete shards and finishes.
    const auto plain = run_qpolicy({"quantize", "-q", "fp8_per_channel", d / "model", "-o", out.string()});
    CHECK(plain.status == 2);
    CHECK_THAT(plain.err, Catch::Contains("--resume finishes it"));
    const auto resumed = run_qpolicy({"quantize", "-q", "fp8_per_channel", "--resume", d / "model", "-o", out.string()});
    INFO(resumed.err);
    CHECK(resumed.status == 0);
    CHECK_THAT(resumed.err, Catch::Contains("kept ") && Catch::Contains("finished '"));
    CHECK(temporaries(out).empty());  // a killed writer's temporary goes too
  }
  REQUIRE(run_qpolicy({"quantize", "-q", "fp8_per_channel", d / "model", "-o", fresh.string()}).status == 0);
  CHECK(tree(out) == tree(fresh));
}
