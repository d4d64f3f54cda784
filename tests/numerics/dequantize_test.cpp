// The decoder of every formula (cpu::dequantize): each element of a quantized tensor decoded to float32
// equals an independent decode written here from the specs' formats (the e4m3 bit layout, the e2m1
// table, E8M0 as a power of two, each key's scale grid, NVFP4's e2m1 x (e4m3 x scale_2)), and to bf16
// and fp16 equals that value rounded to nearest even; swizzled block scales decode as row-major ones;
// a decoded tensor is within its format's error of the input.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../support/random_operands.hpp"
#include "../support/reference_decode.hpp"
#include "../support/type_lists.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/kernels/cpu/dequantize.hpp"
#include "qpolicy/numerics/block_formats.hpp"

namespace qp = qpolicy;
using qp::schemes::formula;

using qpolicy::test::bf16_of;
using qpolicy::test::bits;

namespace {

/// The float32 value of element (r, k) of the stored parts, from the formats (tests/support).
float expected(const qp::schemes::formula_row& f, const std::vector<qp::stored_part>& parts, std::int64_t, std::int64_t r, std::int64_t k,
               std::int64_t cols) {
  return qpolicy::test::reference_element(f, parts[0].bytes.data(), parts[1].bytes.data(), parts.size() > 2 ? parts[2].bytes.data() : nullptr, r, k, cols);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("every formula's decoder gives each code times its scales, rounded once", "[numerics][dequantize]",
                        qpolicy::test::all_formulas) {
  using Formula = TestType;
  const auto& f = qp::schemes::formula_of(Formula::id);
  if (f.codes == qp::schemes::code_format::lut3_tiles) return;  // LUT-B's decode has its vectors (new_schemes_test.cpp)
  std::mt19937 rng(20261204u + static_cast<unsigned>(Formula::id));
  for (int round = 0; round < 6; ++round) {
    const std::int64_t rows = 1 + static_cast<std::int64_t>(rng() % 150);
    const std::int64_t unit = f.k_multiple > 1 ? f.k_multiple : f.block() ? f.block() : 1;
    const std::int64_t cols = unit * (1 + static_cast<std::int64_t>(rng() % (unit > 1 ? 12 : 300)));
    auto x = qpolicy::test::random_bf16(static_cast<std::size_t>(rows * cols), std::ldexp(1.0f, static_cast<int>(rng() % 16) - 8), rng);
    x[rng() % x.size()] = 0x4700;  // an outlier (32768)
    INFO(f.name << " " << rows << "x" << cols);
    const qp::input_view in{x.data(), qp::element::bf16, rows, cols};
    const auto parts = qp::quantize_tensor_parts(Formula::id, in, {});
    auto float_part = [&](std::size_t p) {
      std::vector<float> v(parts[p].bytes.size() / 4);
      std::memcpy(v.data(), parts[p].bytes.data(), parts[p].bytes.size());
      return v;
    };
    const auto scales = f.scales == qp::schemes::scale_format::f32 ? float_part(1) : std::vector<float>();
    const auto second = parts.size() > 2 ? float_part(2) : std::vector<float>();
    const qp::cpu::stored_tensors stored{parts[0].bytes.data(), scales.empty() ? static_cast<const void*>(parts[1].bytes.data()) : scales.data(),
                                         second.empty() ? nullptr : second.data(), nullptr, rows, cols, false};
    std::vector<float> f32(static_cast<std::size_t>(rows * cols));
    std::vector<std::uint16_t> bf16(f32.size()), f16(f32.size());
    qp::cpu::dequantize(Formula::id, stored, qp::element::f32, f32.data(), {2});
    qp::cpu::dequantize(Formula::id, stored, qp::element::bf16, bf16.data(), {2});
    qp::cpu::dequantize(Formula::id, stored, qp::element::f16, f16.data(), {1});
    double err = 0.0, norm = 0.0;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t k = 0; k < cols; ++k) {
        const auto i = static_cast<std::size_t>(r * cols + k);
        const float want = expected(f, parts, rows, r, k, cols);
        if (bits(f32[i]) != bits(want) && !(std::isnan(want) && std::isnan(f32[i])))
          FAIL("element (" << r << ", " << k << "): decoded " << f32[i] << ", expected " << want);
        if (bf16[i] != bf16_of(want)) FAIL("element (" << r << ", " << k << ") to bf16: " << bf16[i] << ", expected " << bf16_of(want));
        if (f16[i] != qp::lp::to_fp16(want)) FAIL("element (" << r << ", " << k << ") to fp16 differs");
        if (f.transform == qp::schemes::pre_transform::none && !std::isnan(want)) {
          const double xv = qp::fp8::from_bf16(x[i]);
          err += (want - xv) * (want - xv);
          norm += xv * xv;
        }
      }
    // Rotating formulas decode to the rotated values; the others come back near the input (MXFP4's and
    // NVFP4's 4-bit codes keep within 0.2 relative RMS of these inputs, the 8-bit formats within 0.05).
    if (f.transform == qp::schemes::pre_transform::none && norm > 0)
      CHECK(std::sqrt(err / norm) < (f.codes == qp::schemes::code_format::e2m1_packed ? 0.2 : 0.05));
    // 128x4 block scales decode as the row-major ones.
    if (f.options == qp::schemes::scale_options::byte_blocks && !f.tiled()) {
      qp::tensor_quant_options o;
      o.swizzled = true;
      const auto sw = qp::quantize_tensor_parts(Formula::id, in, o);
      const qp::cpu::stored_tensors stored_sw{sw[0].bytes.data(), sw[1].bytes.data(), second.empty() ? nullptr : second.data(), nullptr, rows,
                                              cols, true};
      std::vector<float> f32_sw(f32.size());
      qp::cpu::dequantize(Formula::id, stored_sw, qp::element::f32, f32_sw.data(), {2});
      CHECK(std::memcmp(f32_sw.data(), f32.data(), f32.size() * 4) == 0);
    }
  }
}

TEST_CASE("the decoder rounds every e4m3, int8 and e2m1 code under extreme scales as the scalar formulas do", "[numerics][dequantize]") {
  // Every code byte at once, with scales that overflow fp16 (infinity), reach bf16's and fp16's
  // subnormals, and are NaN: each output is the code's value times the scale, rounded once (NaN as
  // to_bf16 and to_fp16 give it; a NaN code stays its own NaN). Odd lengths leave tails past every vector width.
  std::vector<std::uint8_t> codes(2 * 256 + 6);
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint8_t>(i * 37u);
  const std::int64_t cols = static_cast<std::int64_t>(codes.size());
  for (const float s : {1.0f, 1.0e5f, 3.0e-9f, 0x1p-140f, std::numeric_limits<float>::quiet_NaN(), -0.75f}) {
    for (const formula id : {formula::fp8_per_tensor_static, formula::int8_per_channel, formula::nvfp4_per_token}) {
      const auto& f = qp::schemes::formula_of(id);
      const bool packed = f.codes == qp::schemes::code_format::e2m1_packed;
      const std::int64_t n = packed ? 2 * cols : cols;
      // NVFP4 per token: block scale byte 0x38 (1.0) and the row's token scale s.
      const std::vector<std::uint8_t> block_scales(static_cast<std::size_t>(n / 16), 0x38);
      const float row_scale = s;
      const qp::cpu::stored_tensors stored{codes.data(), packed ? static_cast<const void*>(block_scales.data()) : &row_scale,
                                           packed ? &row_scale : nullptr, nullptr, 1, n - n % 16, false};
      const std::int64_t count = stored.cols;
      std::vector<float> f32(static_cast<std::size_t>(count));
      std::vector<std::uint16_t> bf16(f32.size()), f16(f32.size());
      qp::cpu::dequantize(id, stored, qp::element::f32, f32.data(), {1});
      qp::cpu::dequantize(id, stored, qp::element::bf16, bf16.data(), {1});
      qp::cpu::dequantize(id, stored, qp::element::f16, f16.data(), {1});
      for (std::int64_t k = 0; k < count; ++k) {
        const std::uint8_t c = packed ? static_cast<std::uint8_t>(k % 2 ? codes[k / 2] >> 4 : codes[k / 2] & 0xF) : codes[k];
        const float value = id == formula::fp8_per_tensor_static ? qp::fp8::decode(c)
                            : packed                             ? qp::lp::e2m1_value(c)
                                                                 : static_cast<float>(static_cast<std::int8_t>(c));
        // A NaN code decodes to its own NaN under any scale; otherwise value times scale.
        const float want = std::isnan(value) ? value : packed ? value * (1.0f * s) : value * s;
        INFO(f.name << " code " << +c << " scale " << s << " element " << k);
        REQUIRE((bits(f32[k]) == bits(want) || (std::isnan(want) && std::isnan(f32[k]))));
        REQUIRE(bf16[k] == bf16_of(want));
        REQUIRE(f16[k] == qp::lp::to_fp16(want));
      }
    }
  }
}
