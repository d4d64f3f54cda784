// libFuzzer target over the command-line parser. Input: the arguments, separated by NUL bytes.
// Parsing reads no file, so anything but success or a usage_error is a finding.
#include "../../src/cli/cli.hpp"
#include "fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args(1);
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) args.emplace_back();
    else args.back().push_back(static_cast<char>(data[i]));
  }
  try {
    (void)qpolicy::cli::parse_args(args);
  } catch (const qpolicy::cli::usage_error&) {
  }
  return 0;
}

std::vector<std::string> qpolicy::fuzz::seeds() {
  auto join = [](std::initializer_list<const char*> a) {
    std::string s;
    for (const char* x : a) s += std::string(s.empty() ? "" : std::string(1, '\0')) + x;
    return s;
  };
  return {join({"resolve", "-q", "fp8_per_block", "-c", "{\"linear\": \"fp8_per_block\"}"}),
          join({"plan", "--legacy", "-q", "online", "-c", "@p.json", "--model", "m.json", "--format", "json", "--check-shapes", "--tp", "8"}),
          join({"plan", "--model", "m.json", "--tp", "4"}),
          join({"quantize", "-q", "fp8_per_block", "-o", "out.safetensors", "--config-out", "c.json", "--device", "cpu",
                "--threads", "2", "a.safetensors", "b.safetensors"}),
          join({"quantize-tensor", "--key", "fp8_per_block_dynamic", "--scale-layout", "col-tma", "--ue8m0", "x.safetensors", "-o", "y"}),
          join({"quantize", "-q", "a", "-q", "b", "-o", "x", "-o", "y"}),
          join({"--quantization=fp8", "resolve", "-h"}),
          join({"plan", "--tp", "99999999999999999999", "--threads"}),
          join({"-h"})};
}
