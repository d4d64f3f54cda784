#pragma once
// Reading ../shared/conformance/numerics_cases.json (the FP8 vectors) for the tests: cases by kind, the
// hex fields as bf16 inputs, e4m3fn codes and float32 words, and comparisons that accept any NaN code
// or NaN scale where the vectors hold one.
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hex_fields.hpp"
#include "test_inputs.hpp"
#include "qpolicy/numerics/numerics.hpp"
#include "qpolicy/numerics/tensor_view.hpp"

namespace qpolicy::test::fp8_cases {

namespace bj = boost::json;

/// The cases of ../shared/conformance/numerics_cases.json (QPOLICY_NUMERICS_CASES), all or of a kind.
inline const bj::array& cases() { return conformance_cases("QPOLICY_NUMERICS_CASES"); }
inline std::vector<const bj::object*> of_kind(std::string_view kind) { return conformance_cases_of_kind("QPOLICY_NUMERICS_CASES", kind); }

/// An input's `bf16_hex`, e4m3fn codes, float32 bit patterns, a shape.
inline std::vector<std::uint16_t> bf16(const bj::value& input) { return hex_halves(input.at("bf16_hex")); }
inline std::vector<std::uint8_t> codes(const bj::value& text) { return hex_bytes(text); }
inline std::vector<std::uint32_t> words(const bj::value& list) {
  std::vector<std::uint32_t> out;
  for (const auto& v : list.as_array()) out.push_back(hex_value(v.as_string()));
  return out;
}
inline std::vector<std::int64_t> shape(const bj::value& v) { return shape_of(v); }
inline std::uint32_t hex(std::string_view s) { return hex_value(s); }

inline bool is_nan_code(std::uint8_t q) { return (q & 0x7F) == 0x7F; }

/// Codes equal, any NaN code matching any other; the first mismatch is reported.
inline void check_codes(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && !(is_nan_code(got[i]) && is_nan_code(want[i])) && bad++ == 0) first = i;
  INFO("first mismatch at " << first << ": got " << int(got[first]) << ", want " << int(want[first]));
  CHECK(bad == 0);
}
/// Scales equal bit for bit, a NaN matching any NaN.
inline void check_scales(const float* got, const std::vector<std::uint32_t>& want) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto g = fp8::bits_of(got[i]);
    INFO("scale " << i << ": got " << std::hex << g << ", want " << want[i]);
    CHECK((g == want[i] || (fp8::is_nan(got[i]) && fp8::is_nan(fp8::float_of(want[i])))));
  }
}

inline qpolicy::input_view view(const std::vector<std::uint16_t>& data, std::int64_t rows, std::int64_t cols) {
  return {data.data(), qpolicy::element::bf16, rows, cols};
}

}  // namespace qpolicy::test::fp8_cases
