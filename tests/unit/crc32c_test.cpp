// CRC-32C (src/io/crc32c.cpp) against the bit-at-a-time definition: the check value, every length
// around the three-stream blocks of the instruction path, unaligned starts, and a CRC continued over
// pieces equal to the whole's.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "src/io/crc32c.hpp"

namespace {

/// The definition: reflected polynomial 0x82F63B78, ~0 in and out, one bit at a time.
std::uint32_t crc_by_bits(std::span<const std::byte> bytes) {
  std::uint32_t c = ~0u;
  for (const std::byte b : bytes) {
    c ^= static_cast<std::uint32_t>(b);
    for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

}  // namespace

TEST_CASE("CRC-32C equals its definition at every length and start, whole or in pieces", "[unit][crc32c]") {
  const char check[] = "123456789";
  CHECK(qpolicy::crc32c(0, std::as_bytes(std::span(check, 9))) == 0xE3069283u);
  std::mt19937 rng(7);
  std::vector<std::byte> data(3 * 3 * 8192 + 64);
  for (auto& b : data) b = static_cast<std::byte>(rng());
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{9}, std::size_t{3 * 8192 - 1},
                              std::size_t{3 * 8192}, std::size_t{3 * 8192 + 13}, std::size_t{6 * 8192 + 8}, std::size_t{9 * 8192 + 3}})
    for (const std::size_t start : {std::size_t{0}, std::size_t{1}, std::size_t{5}}) {
      const auto bytes = std::span(data).subspan(start, n);
      INFO(n << " bytes from " << start);
      const std::uint32_t want = crc_by_bits(bytes);
      CHECK(qpolicy::crc32c(0, bytes) == want);
      const std::size_t cut = n ? rng() % n : 0;
      CHECK(qpolicy::crc32c(qpolicy::crc32c(0, bytes.first(cut)), bytes.subspan(cut)) == want);
    }
}
