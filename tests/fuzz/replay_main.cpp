// Without libFuzzer: replays the conformance configs (and any files given) through the fuzz target,
// or writes them out as a seed corpus (--write-corpus DIR).
#include <boost/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  const char* cases_path = std::getenv("QPOLICY_CONFIG_CASES");
  std::string corpus_dir;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--write-corpus" && i + 1 < argc) corpus_dir = argv[++i];
    else files.push_back(a);
  }
  std::vector<std::string> inputs;
  if (cases_path) {
    std::ifstream in(cases_path);
    if (!in) {
      std::fprintf(stderr, "config fuzz seeds: cannot read QPOLICY_CONFIG_CASES=%s\n", cases_path);
      return 1;
    }
    std::ostringstream s;
    s << in.rdbuf();
    const auto doc = boost::json::parse(s.str());
    for (const auto& c : doc.at("cases").as_array()) {
      const auto& o = c.as_object();
      if (!o.contains("config")) continue;
      const auto text = boost::json::serialize(o.at("config"));
      for (unsigned flags : {0u, 1u, 2u, 6u, 7u, 32u + 6u}) inputs.push_back(std::string(1, static_cast<char>(flags)) + text);
    }
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    inputs.push_back(s.str());
  }
  if (!corpus_dir.empty()) {
    for (std::size_t i = 0; i < inputs.size(); ++i) std::ofstream(corpus_dir + "/seed-" + std::to_string(i), std::ios::binary) << inputs[i];
    std::cout << "wrote " << inputs.size() << " seeds to " << corpus_dir << "\n";
    return 0;
  }
  for (const auto& in : inputs) LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(in.data()), in.size());
  std::cout << "replayed " << inputs.size() << " inputs without a crash\n";
  return inputs.empty() ? 1 : 0;
}
