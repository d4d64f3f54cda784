// The weight-only GEMMs on the CPU: every GEMM a weight-only layer runs (with its activation treatment)
// meets low-precision-numerics.md §9's bound against float64 on operands computed independently by the
// CPU reference quantizers, on both kernel paths, on Llama-3.1-8B and Qwen3-30B-A3B shapes (scaled
// down); sizes vLLM refuses are refused with its message, and MXFP4 experts are padded as vLLM pads
// them. (The whole layers of every scheme, against the float32 pass: forward_test.cpp.)
#include <catch2/catch.hpp>

#include "../support/type_lists.hpp"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../support/random_operands.hpp"
#include "qpolicy/kernels/cpu/weight_only_forward.hpp"
#include "block_quantizer_impls.hpp"
#include "qpolicy/kernels/cpu/block_reference.hpp"

namespace qp = qpolicy;
namespace fp8 = qpolicy::fp8;
namespace cpu = qpolicy::cpu;
namespace lp = qpolicy::lp;
using qp::schemes::activation_treatment;
using qp::schemes::formula;
using qpolicy::test::bf16_tensor;
using qpolicy::test::random_bf16;
using qpolicy::test::relative_error;
using qpolicy::test::low_precision::quantizer_buffers;
using qpolicy::test::low_precision::reference_quantize;

namespace {

double e2m1(std::uint8_t nibble) { return lp::e2m1_value(nibble); }
std::uint8_t nibble(const std::vector<std::uint8_t>& packed, std::size_t i) { return i % 2 ? packed[i / 2] >> 4 : packed[i / 2] & 0xF; }

/// §9's exact weight operands Ŵ [rows, cols] from the reference quantizer of formula F (float64).
template <class Formula>
std::vector<double> exact_weights(const qpolicy::input_view& w) {
  quantizer_buffers b(Formula::id, w.rows, w.cols, false);
  reference_quantize<Formula>(w, b);
  std::vector<double> out(static_cast<std::size_t>(w.size()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto row = i / static_cast<std::size_t>(w.cols);
    if constexpr (Formula::id == formula::mxfp8_torch) {
      const auto s = b.block_scales[i / 32];
      out[i] = s == 0 ? 0.0 : double(fp8::decode(b.codes[i])) * lp::e8m0_value(s);  // Marlin: byte 0 is 0
    } else if constexpr (Formula::id == formula::mxfp4_even || Formula::id == formula::mxfp4_hadamard_weight) {
      out[i] = e2m1(nibble(b.codes, i)) * lp::e8m0_value(b.block_scales[i / 32]);
    } else if constexpr (Formula::id == formula::int8_per_channel) {
      out[i] = double(static_cast<std::int8_t>(b.codes[i])) * b.row_scales[row];
    } else if constexpr (Formula::id == formula::lut_b) {
      // §B.4 through the reference's own decode (below, once for the whole matrix).
      (void)row;
    } else {
      out[i] = e2m1(nibble(b.codes, i)) * fp8::decode(b.block_scales[i / 16]) * b.tensor_scale[0];
    }
  }
  if constexpr (Formula::id == formula::lut_b) {
    std::vector<float> f(out.size());
    qpolicy::cpu::reference::lut_b_dequantize(b.codes.data(), b.codebook.data(), b.block_scales.data(), w.rows, w.cols, f.data());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = f[i];
  }
  return out;
}

/// §9's exact activation operands Â [rows, k] after a treatment (float64), from the reference quantizers.
std::vector<double> exact_activations(activation_treatment t, const std::vector<float>& x, std::int64_t rows, std::int64_t k) {
  if (qp::schemes::rotates(t)) {  // §A.3: the rotation in bf16, then the rest of the treatment
    std::vector<float> rotated(x.size());
    qpolicy::cpu::reference::hadamard_rotate({x.data(), qpolicy::element::f32, rows, k}, 32, rotated.data());
    for (auto& v : rotated) v = lp::round_to(qpolicy::element::bf16, v);
    return exact_activations(t == activation_treatment::rotated ? activation_treatment::none : activation_treatment::mxfp4_qdq, rotated,
                             rows, k);
  }
  const qpolicy::input_view xv{x.data(), qpolicy::element::f32, rows, k};
  std::vector<double> out(x.size());
  if (t == activation_treatment::mxfp8_qdq) {  // §B.5: torch-path MXFP8 codes, dequantized to bf16
    quantizer_buffers b(formula::mxfp8_torch, rows, k, false);
    reference_quantize<qp::formulas::mxfp8_torch>(xv, b);
    for (std::size_t i = 0; i < x.size(); ++i)
      out[i] = lp::round_to(qpolicy::element::bf16, fp8::decode(b.codes[i]) * lp::e8m0_value(b.block_scales[i / 32]));
    return out;
  }
  if (t == activation_treatment::none) {
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i];
  } else if (t == activation_treatment::mxfp4_qdq) {
    quantizer_buffers b(formula::mxfp4_even, rows, k, false);
    reference_quantize<qp::formulas::mxfp4_even>(xv, b);
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = lp::round_to(qpolicy::element::bf16, float(e2m1(nibble(b.codes, i)) * lp::e8m0_value(b.block_scales[i / 32])));
  } else {
    quantizer_buffers b(formula::nvfp4_per_token, rows, k, false);
    reference_quantize<qp::formulas::nvfp4_per_token>(xv, b);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const auto c = nibble(b.codes, i);
      out[i] = (c & 7) == 0 ? 0.0 : e2m1(c) * fp8::decode(b.block_scales[i / 16]) * b.row_scales[i / static_cast<std::size_t>(k)];
    }
  }
  return out;
}

/// The GEMM of a layer of Scheme with treatment t on x [rows, k] and weight w [n, k], on both paths,
/// against §9: |out - ref| <= ulp_f32(ref) + (K + 4) 2^-24 T.
template <class Scheme, class Formula = cpu::detail::weight_formula<Scheme>>
void check_gemm_bound(activation_treatment t, const std::vector<float>& x, std::int64_t rows, const bf16_tensor& w) {
  const auto m = cpu::detail::quantize_matrix<Formula>(w.view(), 3);
  const auto a = exact_activations(t, x, rows, w.cols);
  const auto wd = exact_weights<Formula>(w.view());
  for (const auto path : {cpu::kernel_path::vectorized, cpu::kernel_path::reference}) {
    std::vector<float> out(static_cast<std::size_t>(rows * w.rows));
    cpu::detail::weight_only_layer_matmul<Scheme>(t, x.data(), rows, m, nullptr, out.data(), {path, 3}, 32);
    std::int64_t bad = 0;
    double worst = 0;
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < w.rows; ++j) {
        double ref = 0, terms = 0;
        for (std::int64_t k = 0; k < w.cols; ++k) {
          const double p = a[static_cast<std::size_t>(i * w.cols + k)] * wd[static_cast<std::size_t>(j * w.cols + k)];
          ref += p;
          terms += std::fabs(p);
        }
        const double ulp = ref == 0 ? 0x1p-149 : std::ldexp(1.0, std::ilogb(ref) - 23);
        const double bound = ulp + double(w.cols + 4) * std::ldexp(terms, -24);
        const double err = std::fabs(double(out[static_cast<std::size_t>(i * w.rows + j)]) - ref);
        worst = std::max(worst, err / bound);
        bad += !(err <= bound);
      }
    INFO((path == cpu::kernel_path::vectorized ? "fast path" : "reference path") << ": worst error / bound " << worst);
    CHECK(bad == 0);
  }
}

// Llama-3.1-8B and Qwen3-30B-A3B attention linears, each dimension / 4 (as the FP8 tests).
struct linear_case {
  const char* what;
  std::int64_t out_features, in_features;
};
const linear_case linear_cases[] = {{"llama qkv_proj", 1536, 1024}, {"llama o_proj", 1024, 1024}, {"llama gate_up_proj", 7168, 1024},
                                    {"llama down_proj", 1024, 3584}, {"qwen3 qkv_proj", 1280, 512},  {"qwen3 o_proj", 512, 1024}};


}  // namespace

TEMPLATE_LIST_TEST_CASE("weight-only GEMMs of every linear layer are within §9's bound", "[forward][weight_only]",
                        qpolicy::test::weight_only_schemes) {
  using Scheme = TestType;
  if constexpr (qp::schemes::contract_of(Scheme::id).linear) {
    const auto& c = GENERATE(from_range(std::begin(linear_cases), std::end(linear_cases)));
    INFO(Scheme::name << " " << c.what << " [" << c.out_features << ", " << c.in_features << "]");
    std::mt19937 rng(static_cast<unsigned>(17 + c.out_features));
    const auto w = random_bf16(c.out_features, c.in_features, 0.02f, rng);
    const auto x = random_bf16(7, c.in_features, 1.0f, rng);
    check_gemm_bound<Scheme>(qp::schemes::contract_of(Scheme::id).linear_treatment, x.floats(), x.rows, w);
  }
}

TEST_CASE("Hadamard-rotated MXFP4 linear GEMMs (Marlin and the emulation) are within §9's bound", "[forward][weight_only]") {
  const auto& c = GENERATE(from_range(std::begin(linear_cases), std::end(linear_cases)));
  const auto t = GENERATE(activation_treatment::rotated, activation_treatment::rotated_mxfp4_qdq);
  INFO("mxfp4 rotated " << c.what << " [" << c.out_features << ", " << c.in_features << "], treatment " << int(t));
  std::mt19937 rng(static_cast<unsigned>(29 + c.out_features));
  const auto w = random_bf16(c.out_features, c.in_features, 0.02f, rng);
  const auto x = random_bf16(7, c.in_features, 1.0f, rng);
  check_gemm_bound<qp::mxfp4, qp::formulas::mxfp4_hadamard_weight>(t, x.floats(), x.rows, w);
}

TEMPLATE_LIST_TEST_CASE("weight-only expert GEMMs are within §9's bound", "[forward][weight_only]", qpolicy::test::weight_only_schemes) {
  using Scheme = TestType;
  // Qwen3-30B-A3B's experts (H=2048, I=768) at H=512, I=192, 48 tokens; each projection's GEMM on one
  // expert, with the activations it gets: x for w13, SiLU-and-mul-like values for w2.
  const std::int64_t experts = 8, hidden = 512, inter = 192, tokens = 48;
  std::mt19937 rng(23);
  const auto w13 = random_bf16(experts * 2 * inter, hidden, 0.03f, rng);
  const auto w2 = random_bf16(experts * hidden, inter, 0.03f, rng);
  const auto x = random_bf16(tokens, hidden, 1.0f, rng);
  constexpr auto treatment = qp::schemes::contract_of(Scheme::id).moe_treatment;
  INFO(Scheme::name << " w13 of expert 3");
  check_gemm_bound<Scheme>(treatment, x.floats(), tokens,
                           {2 * inter, hidden, std::vector<std::uint16_t>(w13.bits.begin() + 3 * 2 * inter * hidden,
                                                                          w13.bits.begin() + 4 * 2 * inter * hidden)});
  const auto h = random_bf16(tokens, inter, 0.3f, rng);
  INFO(Scheme::name << " w2 of expert 5");
  check_gemm_bound<Scheme>(treatment, h.floats(), tokens,
                           {hidden, inter, std::vector<std::uint16_t>(w2.bits.begin() + 5 * hidden * inter, w2.bits.begin() + 6 * hidden * inter)});
}

TEST_CASE("weight-only layers refuse the sizes vLLM refuses, with its message, and pad MXFP4 experts", "[forward][weight_only]") {
  std::mt19937 rng(3);
  const auto w48 = random_bf16(64, 48, 0.02f, rng);
  CHECK_THROWS_WITH(cpu::quantize_linear<qp::mxfp8>(w48.view(), nullptr), "MXFP8 requires input_size_per_partition (48) to be divisible by 32.");
  CHECK_THROWS_WITH(cpu::quantize_linear<qp::mxfp4>(w48.view(), nullptr), "MXFP4 requires input_size_per_partition (48) to be divisible by 32.");
  // MoE with I = 48, H = 80 (the vectors' padded case): MXFP8 refuses, MXFP4 pads to 64 and 96,
  // NVFP4 and INT8 take them as they are.
  const std::int64_t experts = 2, hidden = 80, inter = 48;
  const auto w13 = random_bf16(experts * 2 * inter, hidden, 0.03f, rng), w2 = random_bf16(experts * hidden, inter, 0.03f, rng);
  CHECK_THROWS_WITH(cpu::quantize_moe<qp::mxfp8>(w13.view(), w2.view(), experts),
                    "Online MXFP8 MoE requires hidden/intermediate sizes divisible by 32.");
  const auto m4 = cpu::quantize_moe<qp::mxfp4>(w13.view(), w2.view(), experts);
  CHECK(m4.hidden_padded == 96);
  CHECK(m4.intermediate_padded == 64);
  CHECK(m4.w13[1].rows == 128);
  CHECK(m4.w13[1].cols == 96);
  const auto nv = cpu::quantize_moe<qp::nvfp4_per_token>(w13.view(), w2.view(), experts);
  CHECK(nv.hidden_padded == 80);
  const auto w13_odd = random_bf16(experts * 2 * 40, 72, 0.03f, rng), w2_odd = random_bf16(experts * 72, 40, 0.03f, rng);
  CHECK_THROWS_WITH(cpu::quantize_moe<qp::nvfp4_per_token>(w13_odd.view(), w2_odd.view(), experts), "last dim must be a multiple of 16, got 72");
  CHECK_NOTHROW(cpu::quantize_moe<qp::int8_per_channel_weight_only>(w13_odd.view(), w2_odd.view(), experts));
  // The padded MXFP4 pass runs, and the padding changes nothing of the tokens' outputs' size.
  const auto x = random_bf16(5, hidden, 1.0f, rng);
  std::vector<std::int32_t> ids{0, 1, 1, 0, 0, 1, 1, 0, 0, 1};
  std::vector<float> weights(ids.size(), 0.5f);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(5 * hidden));
  cpu::moe_forward(m4, x.view(), {ids.data(), weights.data(), 2}, out.data());
  std::vector<float> ref(out.size());
  cpu::moe_forward_f32(w13.view(), w2.view(), experts, x.view(), {ids.data(), weights.data(), 2}, ref.data());
  CHECK(relative_error(out, ref) < 0.38);
}

TEMPLATE_LIST_TEST_CASE("decode-batch GEMMs stay within §9's bound on tiny weight blocks and on activations that are not bf16",
                        "[forward][weight_only]", qpolicy::test::weight_only_schemes) {
  using Scheme = TestType;
  // Rows 0..31 are about 2^-128 (MXFP4's scale byte then falls below 2, MXFP8's below 10: their
  // values would be bf16 subnormals, which the bf16 dot products read as zero), rows 32..63 are
  // ordinary. Five rows of x: bf16 values (the bf16 dot-product kernel), then float32 values that are
  // not bf16 (the float32 kernel).
  std::mt19937 rng(41);
  const std::int64_t n = 64, k = 256;
  auto w = random_bf16(n, k, 0.02f, rng);
  for (std::int64_t i = 0; i < 32 * k; ++i) w.bits[static_cast<std::size_t>(i)] = fp8::to_bf16(fp8::from_bf16(w.bits[static_cast<std::size_t>(i)]) * 0x1p-122f);
  const auto x = random_bf16(5, k, 1.0f, rng);
  constexpr auto treatment = qp::schemes::contract_of(Scheme::id).moe_treatment;
  INFO(Scheme::name << ", bf16 activations");
  check_gemm_bound<Scheme>(treatment, x.floats(), x.rows, w);
  auto xf = x.floats();
  for (std::size_t i = 0; i < xf.size(); ++i) xf[i] *= 1.0f + 0x1p-12f * static_cast<float>(i % 7 + 1);  // off bf16 by more than the bound allows
  INFO(Scheme::name << ", float32 activations");
  check_gemm_bound<Scheme>(treatment, xf, x.rows, w);
}

TEMPLATE_TEST_CASE("MX GEMMs of a lone activation row near either end of float32's range stay within §9's bound", "[forward][weight_only]",
                   qp::mxfp4, qp::mxfp8) {
  using Scheme = TestType;
  // A lone row of x decodes e2m1 and e4m3 weights in registers and multiplies each block's sum by its
  // scale (and e4m3's float16 patterns by 2^8), which holds while x times a code's value stays a finite
  // normal float: a row with values near 2^125 (times 6: past float32's maximum) and 2^-130 among
  // ordinary ones takes the decode that scales each weight first. Also 3 rows of them; Marlin's
  // activations (x itself) and the MoE emulation's.
  std::mt19937 rng(45);
  const std::int64_t n = 48, k = 320;
  const auto w = random_bf16(n, k, 0.02f, rng);
  const std::int64_t m = GENERATE(1, 3);
  auto x = random_bf16(m, k, 1.0f, rng).floats();
  for (std::size_t i = 0; i < x.size(); i += 5) x[i] *= 0x1p125f, x[i + 1] *= 0x1p-130f;
  for (const auto treatment : {qp::schemes::contract_of(Scheme::id).linear_treatment, qp::schemes::contract_of(Scheme::id).moe_treatment}) {
    INFO(Scheme::name << ", " << m << " rows of x, treatment " << int(treatment));
    check_gemm_bound<Scheme>(treatment, x, m, w);
  }
}

TEST_CASE("LUT-B GEMMs give NaN where a tile's codebook holds a NaN code, on both kernel paths", "[forward][weight_only]") {
  // A lone row of x decodes each tile's codebook as float16 patterns, where a NaN code (0x7F, 0xFF) is a
  // number: a codebook holding one takes the table. Tile 0 (rows 0-7, columns 0-63) gets one in entry 3,
  // tile 3 (rows 8-15, columns 64-127) in entry 6; every row of a tile uses each entry somewhere.
  std::mt19937 rng(49);
  const std::int64_t n = 16, k = 128;
  const auto w = random_bf16(n, k, 0.02f, rng);
  auto m = cpu::detail::quantize_matrix<cpu::detail::weight_formula<qp::lut_b_moe>>(w.view(), 1);
  const auto uses = [&](std::int64_t tile, int entry) {
    bool all = true;
    for (int r = 0; r < 8; ++r) {
      bool any = false;
      for (int c = 0; c < lp::lut_cols; ++c) any |= lp::lut_index(m.codes.data() + tile * lp::lut_packed_bytes, r * lp::lut_cols + c) == entry;
      all &= any;
    }
    return all;
  };
  REQUIRE(uses(0, 3));
  REQUIRE(uses(3, 6));
  m.codebook[3] = 0x7F;
  m.codebook[3 * lp::lut_entries + 6] = 0xFF;
  const std::int64_t rows = GENERATE(1, 3);
  const auto x = random_bf16(rows, k, 1.0f, rng).floats();
  constexpr auto treatment = qp::schemes::contract_of(qp::lut_b_moe::id).moe_treatment;
  for (const auto path : {cpu::kernel_path::vectorized, cpu::kernel_path::reference}) {
    std::vector<float> out(static_cast<std::size_t>(rows * n));
    cpu::detail::weight_only_layer_matmul<qp::lut_b_moe>(treatment, x.data(), rows, m, nullptr, out.data(), {path, 2});
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        INFO((path == cpu::kernel_path::vectorized ? "fast path" : "reference path") << ", row " << i << " of x, weight row " << j);
        CHECK(std::isnan(out[static_cast<std::size_t>(i * n + j)]));
      }
  }
}

TEMPLATE_LIST_TEST_CASE("decode-batch GEMMs stay within §9's bound when each block of a row has its own scale",
                        "[forward][weight_only]", qpolicy::test::weight_only_schemes) {
  using Scheme = TestType;
  // Each 16-element block of a row is scaled by its own power of two (so neighbouring blocks' scale
  // bytes differ, and a decoder that took one block's scale for another's would be far off), over 80
  // rows (whole 64-row passes and a 16-row tile) and K with a half pair of steps at its end where the
  // formula allows it (NVFP4: half a 32-element step). One row of x, or 17 (a pass of 16 and one), takes
  // the decode fused into a lone row's dot product.
  std::mt19937 rng(43);
  constexpr auto F = cpu::detail::weight_formula<Scheme>::id;
  const std::int64_t n = 80, k = F == formula::lut_b ? 320 : qp::schemes::formula_of(F).block() == 16 ? 272 : 288;
  const std::int64_t m = GENERATE(1, 5, 17);
  auto w = random_bf16(n, k, 0.02f, rng);
  for (std::int64_t i = 0; i < n * k; ++i) {
    const std::int64_t block = i / 16, row = i / k;
    const float factor = std::ldexp(1.0f, static_cast<int>((block * 5 + row) % 9) - 4);
    w.bits[static_cast<std::size_t>(i)] = fp8::to_bf16(fp8::from_bf16(w.bits[static_cast<std::size_t>(i)]) * factor);
  }
  const auto x = random_bf16(m, k, 1.0f, rng);
  constexpr auto treatment = qp::schemes::contract_of(Scheme::id).moe_treatment;
  INFO(Scheme::name << ", " << m << " rows of x");
  check_gemm_bound<Scheme>(treatment, x.floats(), x.rows, w);
}

TEST_CASE("activation treatments give §9's exact operands bit for bit, on both kernel paths", "[forward][weight_only][property]") {
  // Rows of ordinary values, a zero token (NVFP4's NaN block scales), values near 2^-128 (MXFP's scale
  // bytes near 0, products that are float32 subnormals before the bf16 rounding) and near the float32
  // maximum, and a NaN in the last row's second block; K of whole blocks.
  std::mt19937 rng(47);
  const std::int64_t rows = 5, k = 160;
  const auto t = GENERATE(activation_treatment::mxfp8_qdq, activation_treatment::mxfp4_qdq, activation_treatment::nvfp4_per_token);
  auto x = random_bf16(rows, k, 1.0f, rng).floats();
  for (std::int64_t i = 0; i < k; ++i) {
    x[static_cast<std::size_t>(k + i)] = 0.0f;
    x[static_cast<std::size_t>(2 * k + i)] *= 0x1p-126f;
    x[static_cast<std::size_t>(3 * k + i)] *= 0x1p120f;
  }
  x[static_cast<std::size_t>(4 * k + 40)] = std::numeric_limits<float>::quiet_NaN();
  INFO("treatment " << int(t));
  std::vector<double> exact;
  std::vector<float> token_scales;
  if (t == activation_treatment::nvfp4_per_token) {  // §6.3's operands before the token scale, which multiplies the sum
    quantizer_buffers b(formula::nvfp4_per_token, rows, k, false);
    reference_quantize<qp::formulas::nvfp4_per_token>({x.data(), qpolicy::element::f32, rows, k}, b);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const auto c = nibble(b.codes, i);
      exact.push_back((c & 7) == 0 ? 0.0f : lp::e2m1_value(c) * fp8::decode(b.block_scales[i / 16]));
    }
    token_scales = b.row_scales;
  } else {
    exact = exact_activations(t, x, rows, k);
  }
  for (const unsigned threads : {1u, 3u}) {
    const auto a = cpu::detail::treat_activations(t, x.data(), rows, k, threads);
    REQUIRE(a.values.size() == exact.size());
    std::int64_t different = 0;
    for (std::size_t i = 0; i < exact.size(); ++i)
      different += fp8::bits_of(a.values[i]) != fp8::bits_of(static_cast<float>(exact[i]));
    CHECK(different == 0);
    CHECK(a.row_scale == token_scales);
  }
}

TEST_CASE("INT8 decode-batch GEMMs take every code, -128 and 0 included, on both kernel paths", "[forward][weight_only]") {
  // The quantizer never writes -128, but a checkpoint may hold it: codes cycle through all 256 bytes
  // (shifted per row), 80 rows (a 64-row pass and a 16-row tile), activations of 1, 5 and 8 rows; K of
  // whole pairs of steps, and K = 1064, which ends in a pair with 8 elements past its first step and
  // takes several K slices at 8 rows; §9's bound against float64.
  std::mt19937 rng(53);
  const std::int64_t n = 80, k = GENERATE(320, 1064);
  cpu::quantized_matrix w;
  w.rows = n;
  w.cols = k;
  w.codes.resize(static_cast<std::size_t>(n * k));
  for (std::int64_t i = 0; i < n * k; ++i) w.codes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>((i % k + 7 * (i / k)) % 256);
  w.row_scales.assign(static_cast<std::size_t>(n), 1.0f);
  for (const std::int64_t rows : {1, 5, 8}) {
    const auto x = random_bf16(rows, k, 1.0f, rng).floats();
    for (const auto path : {cpu::kernel_path::vectorized, cpu::kernel_path::reference}) {
      std::vector<float> out(static_cast<std::size_t>(rows * n));
      cpu::detail::weight_only_layer_matmul<qp::int8_per_channel_weight_only>(activation_treatment::none, x.data(), rows, w, nullptr, out.data(), {path, 3});
      std::int64_t bad = 0;
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double ref = 0, terms = 0;
          for (std::int64_t c = 0; c < k; ++c) {
            const double p = double(x[static_cast<std::size_t>(i * k + c)]) * static_cast<std::int8_t>(w.codes[static_cast<std::size_t>(j * k + c)]);
            ref += p;
            terms += std::fabs(p);
          }
          const double ulp = ref == 0 ? 0x1p-149 : std::ldexp(1.0, std::ilogb(ref) - 23);
          bad += !(std::fabs(out[static_cast<std::size_t>(i * n + j)] - ref) <= ulp + double(k + 4) * std::ldexp(terms, -24));
        }
      INFO(rows << " activation rows, K = " << k << ", " << (path == cpu::kernel_path::vectorized ? "fast path" : "reference path"));
      CHECK(bad == 0);
    }
  }
}
