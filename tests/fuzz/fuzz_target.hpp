#pragma once
// What each libFuzzer target of tests/fuzz/ provides besides LLVMFuzzerTestOneInput: its seeds (from
// the existing tests, plus every input that once crashed it). seed_main.cpp replays them without
// libFuzzer (any compiler, suite `fuzz`) or writes them as the fuzzer's starting corpus.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace qpolicy::fuzz {

/// The target's seeds.
std::vector<std::string> seeds();

/// A small byte writer for seeds: little-endian integers and text.
inline std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>(v >> (8 * i));
  return s;
}

/// A whole safetensors file: the header text, padded, then `data`.
inline std::string safetensors_bytes(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return le64(header.size()) + header + data;
}

}  // namespace qpolicy::fuzz
