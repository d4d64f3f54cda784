// The low-precision formats (low-precision-numerics.md §1, §7) against every entry of the format cases
// of shared/conformance/low_precision_cases.json: e2m1 encode and decode, E8M0 decode, the CEIL,
// UE8M0-RP and EVEN encoders (alone and in each scheme's scale formula), and the 128x4 scale layout.
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "../support/low_precision_cases.hpp"
#include "qpolicy/numerics/block_formats.hpp"

namespace bj = boost::json;
namespace lp = qpolicy::lp;
using qpolicy::fp8::bits_of;
using qpolicy::fp8::float_of;

using namespace qpolicy::test::low_precision;

TEST_CASE("e2m1 encode: round to nearest even code, saturate, keep the sign", "[numerics][low_precision]") {
  const auto& c = low_precision_case("e2m1_encode_table");
  std::size_t checked = 0;
  for (const auto& e : c.at("entries").as_array()) {
    const float x = float_of(hex32(e.at("x_f32_hex")));
    INFO("x = " << e.at("x").as_string());
    // NaN has no code: qpolicy follows vLLM's Triton bit path (0x7 | sign); finite and inf inputs take
    // PTX's cvt.rn.satfinite (which every oracle agrees with there).
    const auto& want = std::isnan(x) ? e.at("vllm_triton_bits") : e.at("rne_satfinite");
    CHECK(int(lp::e2m1_encode(x)) == byte_of(want));
    ++checked;
  }
  CHECK(checked == 38);
}

TEST_CASE("e2m1 decode and packing", "[numerics][low_precision]") {
  for (const auto& v : low_precision_case("e2m1_decode_table").at("values").as_array()) {
    const auto code = static_cast<std::uint8_t>(v.at("code").as_int64());
    INFO("code " << int(code));
    CHECK(bits_of(lp::e2m1_value(code)) == hex32(v.at("f32_hex")));
    CHECK(lp::e2m1_encode(lp::e2m1_value(code)) == code);  // every code is its own value's encoding
  }
  const auto byte = lp::e2m1_pack(0x3, 0xC);  // element 2j in the low nibble
  CHECK(byte == 0xC3);
  CHECK(lp::e2m1_low(byte) == 0x3);
  CHECK(lp::e2m1_high(byte) == 0xC);
}

TEST_CASE("E8M0 decode: 2^(b-127), b = 0 subnormal, 255 NaN", "[numerics][low_precision]") {
  const auto& values = low_precision_case("e8m0_decode_table").at("values_f32_hex").as_array();
  REQUIRE(values.size() == 256);
  for (int b = 0; b < 256; ++b) {
    INFO("byte " << b);
    const float got = lp::e8m0_value(static_cast<std::uint8_t>(b));
    const float want = float_of(hex32(values[static_cast<std::size_t>(b)]));
    if (std::isnan(want)) CHECK(std::isnan(got));
    else CHECK(bits_of(got) == bits_of(want));
  }
}

TEST_CASE("E8M0 encoders: CEIL and UE8M0-RP per scale, and each scheme's byte per block amax", "[numerics][low_precision]") {
  const auto& c = low_precision_case("e8m0_encode_table");
  for (const auto& e : c.at("entries").as_array()) {
    const float r = float_of(hex32(e.at("r_f32_hex")));
    INFO("r = " << e.at("r").as_string());
    if (!e.at("ceil_log2_byte").is_null()) CHECK(int(lp::e8m0_ceil(r)) == byte_of(e.at("ceil_log2_byte")));
    CHECK(int(lp::e8m0_round_up(r)) == byte_of(e.at("ue8m0_fast_byte")));
  }
  // The scale formulas of each scheme, from a block's amax (§3.2, §3.3, §4.2, §4.3).
  const float tiny = float_of(0x00800000u), r448 = float_of(0x3B124925u), r6 = float_of(0x3E2AAAABu);
  for (const auto& e : c.at("per_amax").as_array()) {
    const float a = float_of(hex32(e.at("amax_f32_hex")));
    INFO("amax = " << e.at("amax").as_string());
    CHECK(int(lp::e8m0_ceil((a > tiny ? a : tiny) / 448.0f)) == byte_of(e.at("mxfp8_torch_byte")));
    CHECK(int(lp::e8m0_round_up(a * r448)) == byte_of(e.at("mxfp8_flashinfer_byte")));
    CHECK(int(lp::e8m0_even(a)) == byte_of(e.at("mxfp4_even_byte")));
    CHECK(int(lp::e8m0_round_up(a * r6)) == byte_of(e.at("mxfp4_flashinfer_rceil_byte")));
  }
}

TEST_CASE("the 128x4 scale layout places every scale as vLLM's swizzles do", "[numerics][low_precision]") {
  const auto& c = low_precision_case("swizzle_128x4/130x6");
  const auto& shape = c.at("input").at("scale_shape").as_array();
  const std::int64_t m = shape[0].as_int64(), s = shape[1].as_int64();
  const auto scales = bytes(c.at("input").at("scale_hex"));
  REQUIRE(scales.size() == static_cast<std::size_t>(m * s));
  const auto want = bytes(c.at("output").at("swizzled_hex"));
  REQUIRE(static_cast<std::int64_t>(want.size()) == lp::swizzled_rows(m) * lp::swizzled_cols(s));
  std::vector<std::uint8_t> got(want.size(), 0);  // padding 0, as vLLM writes it
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t k = 0; k < s; ++k) got[static_cast<std::size_t>(lp::swizzled_offset(r, k, s))] = scales[static_cast<std::size_t>(r * s + k)];
  CHECK(got == want);
}

TEST_CASE("rounding to fp16: every fp16 value round-trips, midpoints go to the even neighbour", "[numerics][low_precision]") {
  using qpolicy::fp8::from_fp16;
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    if ((bits & 0x7C00u) == 0x7C00u && (bits & 0x3FFu)) continue;  // NaN payloads
    INFO("fp16 " << h);
    REQUIRE(lp::to_fp16(from_fp16(bits)) == bits);
    // The midpoint to the next value up (in magnitude) rounds to whichever of the two is even.
    if ((bits & 0x7FFFu) < 0x7BFFu) {
      const auto next = static_cast<std::uint16_t>(bits + 1);
      const double mid = (static_cast<double>(from_fp16(bits)) + from_fp16(next)) / 2;
      const float m = static_cast<float>(mid);  // exact: fp16 midpoints have 12 significant bits
      REQUIRE(static_cast<double>(m) == mid);
      REQUIRE(lp::to_fp16(m) == ((bits & 1u) ? next : bits));
    }
  }
  CHECK(lp::to_fp16(65519.0f) == 0x7BFFu);
  CHECK(lp::to_fp16(65520.0f) == 0x7C00u);
  CHECK(lp::to_fp16(-1e30f) == 0xFC00u);
  CHECK((lp::to_fp16(std::nanf("")) & 0x7E00u) == 0x7E00u);
  CHECK(lp::round_to(qpolicy::element::f16, 0x1p-25f) == 0.0f);  // a tie below the smallest subnormal
  CHECK(lp::round_to(qpolicy::element::bf16, 1.00390625f) == 1.0f);
}

TEST_CASE("the e4m3 casts the low-precision schemes use: torch >= 2.12 saturates, sat is satfinite (§1.3)",
          "[numerics][low_precision]") {
  for (const auto& e : low_precision_case("e4m3_torch_cast_table").at("entries").as_array()) {
    const float x = float_of(hex32(e.at("x_f32_hex")));
    INFO("x = " << e.at("x").as_string());
    CHECK(int(qpolicy::fp8::tcvt(x)) == byte_of(e.at("torch_ge_2_12")));
    CHECK(int(qpolicy::fp8::tcvt_before_2_12(x)) == byte_of(e.at("torch_lt_2_12_legacy")));
    CHECK(int(qpolicy::fp8::sat(x)) == byte_of(e.at("satfinite")));
  }
}
