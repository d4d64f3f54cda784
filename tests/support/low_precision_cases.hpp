#pragma once
// Reading shared/conformance/low_precision_cases.json (QPOLICY_LOW_PRECISION_CASES) for the
// low-precision tests: cases by id or kind, and the hex conventions of its hex_notes.
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hex_fields.hpp"
#include "test_inputs.hpp"
#include "qpolicy/numerics/tensor_view.hpp"

namespace qpolicy::test::low_precision {

namespace bj = boost::json;

/// The cases of ../shared/conformance/low_precision_cases.json (QPOLICY_LOW_PRECISION_CASES).
inline const bj::array& all_cases() { return conformance_cases("QPOLICY_LOW_PRECISION_CASES"); }

inline const bj::object& low_precision_case(std::string_view id) {
  for (const auto& c : all_cases())
    if (c.at("id").as_string() == id) return c.as_object();
  FAIL("no case " << id);
  throw;
}

/// The cases of a kind, in file order (at least one).
inline std::vector<const bj::object*> cases_of_kind(std::string_view kind) {
  return conformance_cases_of_kind("QPOLICY_LOW_PRECISION_CASES", kind);
}

inline std::uint32_t hex32(const bj::value& v) { return hex_value(v.as_string()); }
inline int byte_of(const bj::value& v) { return static_cast<int>(v.as_int64()); }

/// 2 hex digits per byte, 4 per bf16 or fp16 element.
inline std::vector<std::uint8_t> bytes(const bj::value& v) { return hex_bytes(v); }
inline std::vector<std::uint16_t> halves(const bj::value& v) { return hex_halves(v); }

/// A case's input tensor (`bf16_hex` or `f16_hex`) as [rows, cols], the last dimension as cols.
struct input_tensor {
  std::vector<std::uint16_t> bits;
  qpolicy::element type = qpolicy::element::bf16;
  std::int64_t rows = 0, cols = 0;
  qpolicy::input_view view() const { return {bits.data(), type, rows, cols}; }
};
inline input_tensor input_of(const bj::value& input) {
  input_tensor t;
  const auto& o = input.as_object();
  t.type = o.contains("f16_hex") ? qpolicy::element::f16 : qpolicy::element::bf16;
  t.bits = halves(o.at(t.type == qpolicy::element::f16 ? "f16_hex" : "bf16_hex"));
  const auto shape = shape_of(o.at("shape"));
  t.cols = shape.back();
  t.rows = static_cast<std::int64_t>(t.bits.size()) / t.cols;
  REQUIRE(t.rows * t.cols == static_cast<std::int64_t>(t.bits.size()));
  return t;
}

/// Calls fn(case, its input tensor, its output object) for every case of `kind` (single-input kinds),
/// with the case's id in every failure message.
template <class Fn>
void for_each_case(std::string_view kind, Fn&& fn) {
  for (const auto* c : cases_of_kind(kind)) {
    INFO(c->at("id").as_string());
    fn(*c, input_of(c->at("input")), c->at("output").as_object());
  }
}

/// Code bytes equal, a NaN code of either sign (0x7F/0xFF) matching another NaN code.
inline bool same_e4m3_code(std::uint8_t a, std::uint8_t b) { return a == b || ((a & 0x7F) == 0x7F && (b & 0x7F) == 0x7F); }

/// e2m1 nibbles equal, a zero of either sign matching another zero (§11: 0x0 and 0x8 are both accepted).
inline bool same_e2m1_code(std::uint8_t a, std::uint8_t b) { return a == b || ((a & 7u) == 0 && (b & 7u) == 0); }

/// Packed e2m1 bytes equal nibble by nibble, up to the sign of zero codes.
inline void check_packed(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("byte " << i << ": got " << int(got[i]) << ", want " << int(want[i]));
    REQUIRE(same_e2m1_code(got[i] & 0xFu, want[i] & 0xFu));
    REQUIRE(same_e2m1_code(got[i] >> 4, want[i] >> 4));
  }
}
inline void check_packed(const std::vector<std::uint8_t>& got, const bj::value& want_hex) { check_packed(got, bytes(want_hex)); }

/// e4m3 code bytes equal, NaN codes of either sign matching.
inline void check_e4m3_codes(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("code " << i << ": got " << int(got[i]) << ", want " << int(want[i]));
    REQUIRE(same_e4m3_code(got[i], want[i]));
  }
}

}  // namespace qpolicy::test::low_precision
