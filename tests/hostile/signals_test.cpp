// Hostile suite, interruptions: SIGINT, SIGTERM and SIGHUP midway remove the temporaries and exit with
// 128 + the signal; SIGKILL midway leaves no file that looks complete, and the next run removes the
// dead writer's temporary and says so.
#include <signal.h>

#include <chrono>
#include <thread>

#include "hostile.hpp"

using namespace hostile;

namespace {

/// A checkpoint big enough that quantizing it takes a while (96 MiB of bf16 in 48 tensors).
std::string slow_checkpoint() {
  std::string header = "{", data;
  const std::int64_t rows = 1024, cols = 1024, bytes = rows * cols * 2;
  std::string tensor(static_cast<std::size_t>(bytes), '\0');
  for (std::size_t i = 0; i < tensor.size(); i += 2) {
    tensor[i] = static_cast<char>(i * 37 / 2);
    tensor[i + 1] = static_cast<char>(0x3c + (i / 2) % 3);
  }
  for (int t = 0; t < 48; ++t) {
    header += (t ? ", " : "") + std::string("\"layers.") + std::to_string(t) + ".proj.weight\": {\"dtype\": \"BF16\", \"shape\": [1024, 1024], " +
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
