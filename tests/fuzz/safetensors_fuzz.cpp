// libFuzzer target over the safetensors header parser. Input: two bytes giving the data section's
// size, then the header text. Any outcome but a config_error or success is a finding (crash,
// sanitizer report, another exception). Without libFuzzer (QPOLICY_REPLAY), main() replays the seeds
// below or writes them as a corpus (--write-corpus DIR).
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "qpolicy/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::uint64_t data_size = data[0] | (static_cast<std::uint64_t>(data[1]) << 8);
  try {
    qpolicy::safetensors::parse_header({reinterpret_cast<const char*>(data + 2), size - 2}, data_size, "fuzz");
  } catch (const qpolicy::config_error&) {
  }
  return 0;
}

#ifdef QPOLICY_REPLAY
namespace {
std::vector<std::string> seeds() {
  auto with_size = [](unsigned n, const std::string& header) {
    return std::string{static_cast<char>(n & 0xFF), static_cast<char>(n >> 8)} + header;
  };
  return {
      with_size(24, R"({"w": {"dtype": "BF16", "shape": [3, 4], "data_offsets": [0, 24]}})"),
      with_size(28, R"({"__metadata__": {"qpolicy.plan": "{}"}, "w": {"dtype": "F8_E4M3", "shape": [2, 12],
        "data_offsets": [0, 24]}, "w_scale": {"dtype": "F32", "shape": [1], "data_offsets": [24, 28]}})"),
      with_size(8, R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})"),
      with_size(0, R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 0]}})"),
      with_size(3, R"({"t": {"dtype": "U8", "shape": [-1], "data_offsets": [3, 1]}, "t": {}})"),
      with_size(0, R"({"__metadata__": {"k": 1}, "x": [1, 2, {"y": null}]})"),
      // Found by the fuzzer: a dimension past the double range (repr of infinity).
      with_size(0, R"({"t": {"dtype": "F16", "shape": [42968888000000000000000000000000000E0000000094967296, 16], "data_offsets": [0, 0]}})"),
      with_size(16, R"({"e": {"dtype": "I64", "shape": [0, 5], "data_offsets": [0, 0]}, "f": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]}})"),
  };
}
}  // namespace

int main(int argc, char** argv) {
  const auto inputs = seeds();
  if (argc == 3 && std::string(argv[1]) == "--write-corpus") {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      std::ofstream(std::string(argv[2]) + "/seed-" + std::to_string(i), std::ios::binary) << inputs[i];
    return 0;
  }
  for (const auto& in : inputs) LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(in.data()), in.size());
  std::cout << "replayed " << inputs.size() << " safetensors headers without a crash\n";
  return 0;
}
#endif
