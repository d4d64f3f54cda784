#pragma once
// The shared conformance files' hex conventions (their hex_notes): bytes as 2 hex digits each, 16-bit
// elements (bf16, fp16) as 4, 32-bit words as strings of hex; shapes as lists of integers.
#include <boost/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qpolicy::test {

/// A hex string of any length (up to 32 bits) as a number.
inline std::uint32_t hex_value(std::string_view s) { return static_cast<std::uint32_t>(std::stoul(std::string(s), nullptr, 16)); }

/// A string of 2 hex digits per byte.
inline std::vector<std::uint8_t> hex_bytes(const boost::json::value& v) {
  const auto text = v.as_string();
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 2 <= text.size(); i += 2) out.push_back(static_cast<std::uint8_t>(hex_value({text.data() + i, 2})));
  return out;
}

/// A string of 4 hex digits per 16-bit element (bf16 or fp16 bits).
inline std::vector<std::uint16_t> hex_halves(const boost::json::value& v) {
  const auto text = v.as_string();
  std::vector<std::uint16_t> out;
  for (std::size_t i = 0; i + 4 <= text.size(); i += 4) out.push_back(static_cast<std::uint16_t>(hex_value({text.data() + i, 4})));
  return out;
}

/// A list of integers.
inline std::vector<std::int64_t> shape_of(const boost::json::value& v) {
  std::vector<std::int64_t> out;
  for (const auto& d : v.as_array()) out.push_back(d.to_number<std::int64_t>());
  return out;
}

}  // namespace qpolicy::test
