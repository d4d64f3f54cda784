// vLLM 0.34's new schemes against shared/conformance/new_schemes_cases.json on the CPU, each case on the
// reference and on the fast path: the Hadamard matrix, the rotation (bit for bit, torch-CPU's order),
// MXFP4 after it for weights and activations (EVEN; the unconfirmed RCEIL variant), LUT-B's tiles and
// their decode, and the MXFP8 activations of LUT-B experts.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "../support/new_schemes_cases.hpp"
#include "block_quantizer_impls.hpp"
#include "qpolicy/kernels/cpu/block_quantizer.hpp"
#include "qpolicy/kernels/cpu/block_reference.hpp"
#include "qpolicy/numerics/detail/hadamard.hpp"

namespace qp = qpolicy;
namespace lp = qpolicy::lp;
namespace ref = qpolicy::cpu::reference;
using namespace qpolicy::test::new_schemes;
using qpolicy::test::low_precision::quantizer_buffers;

namespace {

/// x's rows rotated, as x's dtype bits: the reference or the fast path.
std::vector<std::uint16_t> rotated_bits(const input_tensor& x, bool fast) {
  std::vector<std::uint16_t> out(static_cast<std::size_t>(x.rows * x.cols));
  if (fast) {
    qp::cpu::hadamard_rotate(x.view(), 32, out.data(), {3});
  } else {
    std::vector<float> f(out.size());
    ref::hadamard_rotate(x.view(), 32, f.data());
    for (std::size_t i = 0; i < f.size(); ++i) out[i] = qp::fp8::to_bf16(f[i]);
  }
  return out;
}

/// Formula F on x by the reference or the fast path.
template <class Formula>
quantizer_buffers run(const input_tensor& x, bool fast) {
  quantizer_buffers out(Formula::id, x.rows, x.cols, false);
  if (fast) qpolicy::test::low_precision::fast_quantize<Formula>(x.view(), out);
  else qpolicy::test::low_precision::reference_quantize<Formula>(x.view(), out);
  return out;
}

const char* path_name(bool fast) { return fast ? "CPU fast path" : "CPU reference"; }

}  // namespace

TEST_CASE("The normalized Hadamard matrix of size 32 (§A.2)", "[numerics][new_schemes][hadamard]") {
  for (const auto* c : new_cases("hadamard_matrix")) {
    const auto want = bytes(c->at("output").at("h_f32_hex"));
    const float m = lp::hadamard_magnitude(32);
    for (int i = 0; i < 32; ++i)
      for (int j = 0; j < 32; ++j) {
        const std::size_t at = static_cast<std::size_t>((i * 32 + j) * 4);
        const std::uint32_t w = (std::uint32_t{want[at]} << 24) | (std::uint32_t{want[at + 1]} << 16) | (std::uint32_t{want[at + 2]} << 8) | want[at + 3];
        INFO("entry (" << i << ", " << j << ")");
        REQUIRE(qp::fp8::bits_of(lp::hadamard_entry(i, j, m)) == w);
      }
  }
  REQUIRE((lp::is_hadamard_size(32) && lp::is_hadamard_size(1) && !lp::is_hadamard_size(48) && !lp::is_hadamard_size(0)));
}

TEST_CASE("MXFP4 after the Hadamard rotation: rotated rows, EVEN codes and scales (§A.3-A.4)", "[numerics][new_schemes][hadamard]") {
  const bool fast = GENERATE(false, true);
  INFO(path_name(fast));
  for (const char* kind : {"mxfp4_hadamard_weight_quant", "mxfp4_hadamard_act_quant"}) {
    const bool weight = std::string_view(kind) == "mxfp4_hadamard_weight_quant";
    for_each_new_case(kind, [&](const bj::object& c, const input_tensor& x, const bj::object& out) {
      CHECK(rotated_bits(x, fast) == halves(out.at("rotated_bf16_hex")));
      const auto q = weight ? run<qp::formulas::mxfp4_hadamard_weight>(x, fast) : run<qp::formulas::mxfp4_hadamard_even>(x, fast);
      check_packed(q.codes, out.at("q_packed_hex"));
      CHECK(q.row_major_scales() == bytes(out.at("scale_e8m0_hex")));
      // The dequantized values F4 * E8 in bf16 (exact), zero signs free.
      const auto want = halves(out.at("dequant_bf16_hex"));
      for (std::int64_t i = 0; i < x.rows * x.cols; ++i) {
        const float v = lp::weight_operand<qp::schemes::formula::mxfp4_even>(q.codes.data(), q.block_scales.data(), x.cols, i / x.cols, i % x.cols);
        INFO("element " << i);
        REQUIRE((qp::fp8::to_bf16(v) & 0x7FFFu) == (want[static_cast<std::size_t>(i)] & 0x7FFFu));
      }
      if (c.contains("flashinfer_rceil_variant")) {  // Blackwell's activations: derived, not executed (confirmed=false)
        const auto& fi = c.at("flashinfer_rceil_variant").as_object();
        const auto r = run<qp::formulas::mxfp4_hadamard_rceil>(x, fast);
        check_packed(r.codes, fi.at("q_packed_hex"));
        CHECK(r.row_major_scales() == bytes(fi.at("scale_e8m0_hex")));
      }
    });
  }
}

TEST_CASE("Other Hadamard sizes: both paths agree, 1 is the identity, and H is orthonormal", "[numerics][new_schemes][hadamard]") {
  constexpr std::int64_t rows = 4, cols = 256;
  std::vector<float> x(rows * cols);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 23) - 11.0f + 0.125f * static_cast<float>(i % 5);
  const qp::input_view in{x.data(), qp::element::f32, rows, cols};
  for (const std::int64_t size : {1, 2, 64, 256}) {
    INFO("size " << size);
    std::vector<float> reference(x.size()), fast(x.size()), twice(x.size());
    ref::hadamard_rotate(in, size, reference.data());
    qp::cpu::hadamard_rotate(in, size, fast.data(), {2});
    REQUIRE(fast == reference);
    if (size == 1) REQUIRE(fast == x);
    qp::cpu::hadamard_rotate({fast.data(), qp::element::f32, rows, cols}, size, twice.data(), {2});
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(twice[i] == Approx(x[i]).margin(1e-4));
  }
}

TEST_CASE("LUT-B: tiles, codebooks and scales of quantize_lut_b, and their decode (§B.2-B.4)", "[numerics][new_schemes][lut_b]") {
  const bool fast = GENERATE(false, true);
  INFO(path_name(fast));
  for_each_new_case("lut_b_weight_quant", [&](const bj::object&, const input_tensor& x, const bj::object& out) {
    const auto q = run<qp::formulas::lut_b>(x, fast);
    CHECK(q.codes == bytes(out.at("packed_hex")));
    CHECK(q.codebook == bytes(out.at("codebook_e4m3_hex")));
    CHECK(q.block_scales == bytes(out.at("scale_e8m0_hex")));
    const auto indices = bytes(out.at("indices_hex"));
    for (std::size_t i = 0; i < indices.size(); ++i) {
      INFO("index " << i);
      REQUIRE(lp::lut_index(q.codes.data() + (i / 512) * 192, static_cast<int>(i % 512)) == indices[i]);
    }
    std::vector<std::uint16_t> dq(static_cast<std::size_t>(x.rows * x.cols));
    qp::cpu::lut_b_dequantize(q.codes.data(), q.codebook.data(), q.block_scales.data(), x.rows, x.cols, qp::element::bf16, dq.data());
    CHECK(dq == halves(out.at("dequant_bf16_hex")));
  });
}

TEST_CASE("LUT-B decode: bf16 and fp16, scale bytes 0 and 254 (§B.4)", "[numerics][new_schemes][lut_b]") {
  for (const auto* c : new_cases("lut_b_dequant")) {
    INFO(c->at("id").as_string());
    const auto& in = c->at("input").as_object();
    const auto packed = bytes(in.at("packed_hex")), books = bytes(in.at("codebook_e4m3_hex")), scales = bytes(in.at("scale_e8m0_hex"));
    const auto shape = qpolicy::test::shape_of(c->at("output").at("shape"));
    const std::int64_t cols = shape.back(), rows = static_cast<std::int64_t>(packed.size() / 192) * 8 * 64 / cols;
    std::vector<float> reference(static_cast<std::size_t>(rows * cols));
    ref::lut_b_dequantize(packed.data(), books.data(), scales.data(), rows, cols, reference.data());
    for (const auto type : {qp::element::bf16, qp::element::f16}) {
      const auto want = halves(c->at("output").at(type == qp::element::bf16 ? "dequant_bf16_hex" : "dequant_f16_hex"));
      std::vector<std::uint16_t> got(want.size());
      qp::cpu::lut_b_dequantize(packed.data(), books.data(), scales.data(), rows, cols, type, got.data(), {2});
      CHECK(got == want);
      for (std::size_t i = 0; i < want.size(); ++i) {
        INFO("element " << i);
        REQUIRE((type == qp::element::bf16 ? qp::fp8::to_bf16(reference[i]) : lp::to_fp16(reference[i])) == want[i]);
      }
    }
  }
}

TEST_CASE("LUT-B experts' activations: MXFP8 on the torch path, quantize-dequantize to bf16 (§B.5)", "[numerics][new_schemes][lut_b]") {
  const bool fast = GENERATE(false, true);
  INFO(path_name(fast));
  for_each_new_case("lut_b_act_mxfp8_qdq", [&](const bj::object&, const input_tensor& x, const bj::object& out) {
    const auto q = run<qp::formulas::mxfp8_torch>(x, fast);
    check_e4m3_codes(q.codes, bytes(out.at("q_hex")));
    CHECK(q.row_major_scales() == bytes(out.at("scale_e8m0_hex")));
    const auto want = halves(out.at("qdq_bf16_hex"));
    for (std::size_t i = 0; i < want.size(); ++i) {
      const float v = qp::fp8::decode(q.codes[i]) * lp::e8m0_value(q.block_scales[i / 32]);
      INFO("element " << i);
      REQUIRE(qp::fp8::to_bf16(v) == want[i]);
    }
  });
}
