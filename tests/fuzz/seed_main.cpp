// Without libFuzzer: replays a target's seeds (and any files given), or writes them as a corpus
// (--write-corpus DIR). A crash, a sanitizer report or an unexpected exception fails the replay.
#include <fstream>
#include <iostream>
#include <sstream>

#include "fuzz_target.hpp"

int main(int argc, char** argv) {
  auto inputs = qpolicy::fuzz::seeds();
  std::string corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--write-corpus" && i + 1 < argc) {
      corpus = argv[++i];
      continue;
    }
    std::ifstream in(a, std::ios::binary);
    if (!in) {
      std::cerr << "cannot read " << a << "\n";
      return 1;
    }
    std::ostringstream s;
    s << in.rdbuf();
    inputs.push_back(s.str());
  }
  if (!corpus.empty()) {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      std::ofstream(corpus + "/seed-" + std::to_string(i), std::ios::binary) << inputs[i];
    std::cout << "wrote " << inputs.size() << " seeds to " << corpus << "\n";
    return 0;
  }
  for (const auto& in : inputs) LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(in.data()), in.size());
  std::cout << "replayed " << inputs.size() << " inputs without a finding\n";
  return inputs.empty() ? 1 : 0;
}
