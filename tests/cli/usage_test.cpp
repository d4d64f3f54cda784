// The command line of quantize and quantize-tensor: bad flags and arguments get the usage error's exit
// status and a message naming the flag and the value, and write nothing.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "../support/checkpoint_fixture.hpp"
#include "../support/process.hpp"
#include "../support/temp_dir.hpp"
#include "../support/test_inputs.hpp"

namespace fs = std::filesystem;

TEST_CASE("quantize and quantize-tensor refuse bad flags with a message", "[cli][usage]") {
  static const qpolicy::test::temp_dir scratch("usage");
  const auto dir = [&] { return scratch.path(); };
  const auto in = (dir() / "flags.safetensors").string();
  qpolicy::test::write_bf16_checkpoint(qpolicy::test::synthetic(), in);
  const auto exe = qpolicy::test::required_env("QPOLICY_EXE");
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), exe);
    return qpolicy::test::run_process(args);
  };
  const auto out = (dir() / "flags_out.safetensors").string();
  struct bad {
    std::vector<std::string> args;
    int status;
    std::string message;
  };
  const std::vector<bad> cases{
      {{"quantize-tensor", "--key", "fp8_per_nothing", in, "-o", out}, 2, "--key: unknown quantization name 'fp8_per_nothing'"},
      {{"quantize-tensor", "--key", "fp8_per_token", "--scale-layout", "diagonal", in, "-o", out}, 1, "--scale-layout must be row, col, col-tma or swizzled, got 'diagonal'"},
      {{"quantize-tensor", "--key", "fp8_per_token", "--device", "tpu", in, "-o", out}, 1, "--device must be cpu or cuda, got 'tpu'"},
      {{"quantize-tensor", "--key", "fp8_per_token", "--threads", "0", in, "-o", out}, 1, "--threads must be an integer from 1 to 4096, got '0'"},
      {{"quantize-tensor", "--key", "fp8_per_token", in}, 1, "quantize-tensor needs -o OUTPUT.safetensors"},
      {{"quantize-tensor", "--key", "fp8_per_token", in, in, "-o", out}, 1, "takes one input file"},
      {{"--version", "quantize"}, 1, "--version takes nothing else, got 'quantize'"},
      {{"quantize", "-q", "fp8_per_block", in}, 1, "quantize needs -o"},
      {{"quantize", "-q", "fp8_per_block", "-o", out}, 1, "quantize needs an input"},
      {{"quantize", "-q", "fp8_per_block", "--threads", "x", "-o", out, in}, 1, "--threads must be an integer from 1 to 4096, got 'x'"},
      {{"quantize", "-q", "fp8_per_block", "--device", "gpu", "-o", out, in}, 1, "--device must be cpu or cuda, got 'gpu'"},
      {{"quantize", "-q", "fp8_per_block", "-o", out, (dir() / "missing.safetensors").string()}, 1, "missing.safetensors': No such file or directory"},
  };
  for (const auto& c : cases) {
    const auto r = run(c.args);
    INFO(c.message << "\n" << r.err);
    CHECK(r.status == c.status);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    CHECK_FALSE(fs::exists(out));
  }
}

