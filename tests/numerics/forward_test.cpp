// GEMMs and layers on the CPU: the tiled FP8 GEMMs equal the reference GEMMs bit for bit; the linear and
// MoE layers of every scheme of the registry (each with every activation its layers take) run both
// kernel paths -- the same bits for the scaled FP8 GEMM -- and stay within the documented error of the
// unquantized float32 pass on shapes from ../shared/models (scaled down).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "qpolicy/kernels/cpu/forward.hpp"
#include "qpolicy/kernels/cpu/detail/gemm_tiled.hpp"
#include "qpolicy/kernels/cpu/gemm_reference.hpp"
#include "qpolicy/kernels/cpu/reference.hpp"
#include "qpolicy/dispatch/dispatch.hpp"
#include "../support/type_lists.hpp"
#include "../support/random_operands.hpp"

namespace qp = qpolicy;
namespace fp8 = qpolicy::fp8;
using qpolicy::test::random_codes;
using qpolicy::test::random_scales;
namespace cpu = qpolicy::cpu;
using qpolicy::test::bf16_tensor;
using qpolicy::test::random_bf16;
using qpolicy::test::relative_error;

namespace {
/// Whether out [m, n] is within fp8-numerics §10's tolerance of the exact GEMM of the decoded codes
/// (sums in any order): |out - exact| <= ulp(exact) + (K + 4) 2^-24 sum |terms| (scales and all).
bool within_gemm_bound(const std::vector<float>& out, const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& w,
                       std::int64_t m, std::int64_t n, std::int64_t k, const std::function<double(std::int64_t, std::int64_t, std::int64_t)>& scale) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double exact = 0, terms = 0;
      for (std::int64_t t = 0; t < k; ++t) {
        const double p = double(fp8::decode(a[static_cast<std::size_t>(i * k + t)])) * fp8::decode(w[static_cast<std::size_t>(j * k + t)]) * scale(i, j, t);
        exact += p;
        terms += std::fabs(p);
      }
      const double ulp = exact == 0 ? 0x1p-149 : std::ldexp(1.0, std::ilogb(exact) - 23);
      const double got = out[static_cast<std::size_t>(i * n + j)];
      if (!(std::fabs(got - exact) <= ulp + double(k + 4) * std::ldexp(terms, -24))) return false;
    }
  return true;
}
}  // namespace

TEST_CASE("tiled FP8 GEMMs: within §10's bound at decode batches, the reference's bits above", "[gemm]") {
  const std::int64_t m = GENERATE(1, 5, 16, 17, 67), n = GENERATE(1, 33, 130, 256), k = GENERATE(128, 256, 200);
  INFO("m=" << m << " n=" << n << " k=" << k);
  std::mt19937 rng(static_cast<unsigned>(7 + m * 1000 + n * 10 + k));
  const auto a = random_codes(static_cast<std::size_t>(m * k), rng), w = random_codes(static_cast<std::size_t>(n * k), rng);
  std::vector<float> want(static_cast<std::size_t>(m * n)), got(want.size());
  // Up to 16 rows the GEMM decodes weight rows step by step and sums 16 lanes (decode_gemm.hpp); more
  // rows take the panels, whose per-output K-order sums are the reference's.
  const bool decode_batch = m <= 16;
  const auto check = [&](const std::function<double(std::int64_t, std::int64_t, std::int64_t)>& scale) {
    if (decode_batch) REQUIRE(within_gemm_bound(got, a, w, m, n, k, scale));
    else REQUIRE(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
  };
  for (bool a_rows : {false, true})
    for (bool w_rows : {false, true}) {
      const auto sa = random_scales(static_cast<std::size_t>(m), rng), sw = random_scales(static_cast<std::size_t>(n), rng);
      cpu::reference::gemm_scaled(a.data(), sa.data(), a_rows, w.data(), sw.data(), w_rows, m, n, k, want.data());
      cpu::gemm_scaled(a.data(), sa.data(), a_rows, w.data(), sw.data(), w_rows, m, n, k, got.data(), nullptr, {3});
      check([&](std::int64_t i, std::int64_t j, std::int64_t) { return double(sa[a_rows ? i : 0]) * sw[w_rows ? j : 0]; });
    }
  if (k % 128 != 0) return;  // block scaling takes whole 128-wide K chunks
  const auto sa = random_scales(static_cast<std::size_t>(m * (k / 128)), rng);
  const auto sw = random_scales(static_cast<std::size_t>(((n + 127) / 128) * (k / 128)), rng);
  cpu::reference::gemm_blocked(a.data(), sa.data(), w.data(), sw.data(), m, n, k, want.data());
  cpu::gemm_blocked(a.data(), sa.data(), w.data(), sw.data(), m, n, k, got.data(), nullptr, {2});
  check([&](std::int64_t i, std::int64_t j, std::int64_t t) {
    return double(sa[static_cast<std::size_t>(i * (k / 128) + t / 128)]) * sw[static_cast<std::size_t>((j / 128) * (k / 128) + t / 128)];
  });
}

TEST_CASE("decode-batch FP8 GEMMs give NaN in the outputs of weight rows with a NaN code, and the same bits elsewhere", "[gemm]") {
  // A lone row of x decodes e4m3 codes as float16 patterns, where a NaN code (0x7F, 0xFF) is a number:
  // a chunk holding one takes the field-by-field decode. Rows 3 and 7 hold one in their second chunk.
  const std::int64_t m = GENERATE(1, 3), n = 40, k = 384;
  std::mt19937 rng(static_cast<unsigned>(11 + m));
  const auto a = random_codes(static_cast<std::size_t>(m * k), rng), clean = random_codes(static_cast<std::size_t>(n * k), rng);
  auto w = clean;
  w[static_cast<std::size_t>(3 * k + 130)] = 0x7F;
  w[static_cast<std::size_t>(7 * k + 200)] = 0xFF;
  const std::vector<float> sa(1, 0.5f), sw(1, 0.25f);
  std::vector<float> got(static_cast<std::size_t>(m * n)), want(got.size());
  cpu::gemm_scaled(a.data(), sa.data(), false, w.data(), sw.data(), false, m, n, k, got.data(), nullptr, {2});
  cpu::gemm_scaled(a.data(), sa.data(), false, clean.data(), sw.data(), false, m, n, k, want.data(), nullptr, {2});
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      INFO("row " << i << " of x, weight row " << j);
      const float g = got[static_cast<std::size_t>(i * n + j)], e = want[static_cast<std::size_t>(i * n + j)];
      if (j == 3 || j == 7) CHECK(std::isnan(g));
      else CHECK(fp8::bits_of(g) == fp8::bits_of(e));
    }
}

TEST_CASE("the float32 GEMM baseline computes A W^T", "[gemm]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> d;
  const std::int64_t m = 9, n = 40, k = 130;
  std::vector<float> a(m * k), w(n * k), out(m * n);
  for (auto& v : a) v = d(rng);
  for (auto& v : w) v = d(rng);
  cpu::gemm_f32(a.data(), w.data(), m, n, k, out.data());
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (std::int64_t t = 0; t < k; ++t) want += double(a[i * k + t]) * w[j * k + t];
      REQUIRE(std::fabs(out[i * n + j] - want) <= 1e-4 * (1 + std::fabs(want)));
    }
}

namespace {
// Error bounds of a layer against the unquantized float32 pass, ||out - ref|| / ||ref||, by what its
// scheme's numbers keep.
// Scaled FP8: an e4m3fn code carries 3 mantissa bits: rounding moves a value by at most 2^-4 of itself
// and by about 2^-4 / sqrt(3) ~ 3.6% RMS for values spread over a binade; a GEMM output sums K such
// errors of both operands, which are independent, so its relative RMS error is about sqrt(2) x 3.6% ~ 5%
// when one scale covers values of similar size. Coarse scales (one per tensor, with outliers) push small
// values into the subnormal range, so per-tensor gets more room than per-channel and blocks. Measured:
// linear 3.6-3.8% for every scheme, MoE 6.1-6.5%.
// Weight-only: MXFP8 keeps 3 mantissa bits of the weights only (as FP8, about 5% RMS), MXFP4 1 bit (about
// 15%); INT8 (7 bits) is the closest; the 4-bit formats with quantized activations (the MXFP4 MoE
// emulation, NVFP4 per token) the farthest. Measured: linear MXFP8 2.6-2.7%, MXFP4 11.6-11.9%; MoE INT8
// 2.4%, MXFP8 4.7%, NVFP4 23%, MXFP4 30% (power-of-two scales over 1-bit mantissas on both operands).
// LUT-B (3-bit Lloyd codebooks per 8x64 tile, MXFP8 activations): a 3-bit Lloyd-Max quantizer keeps about
// 14.6 dB on Gaussian weights, a relative RMS error near 0.19 per matrix (e4m3 snapping of the eight
// centres and MXFP8's 3-bit activations add little); a MoE compounds gate and up through SiLU-and-mul
// (about 0.27) and then the down projection: sqrt(0.27^2 + 0.19^2) ~ 0.33. Measured 0.338; bound 0.4.
// A Hadamard-rotated MXFP4 linear layer keeps MXFP4's bound: the rotation is orthonormal.
// The bf16 output rounding adds at most 2^-9. MoE runs two GEMMs, SiLU-and-mul between them.
template <class Pair, qp::layer_kind Kind>
constexpr double error_bound() {
  using Scheme = typename Pair::scheme;
  constexpr bool moe = Kind == qp::layer_kind::moe;
  if constexpr (cpu::is_weight_only<Scheme>) {
    if (!moe) return Scheme::id == qp::method::mxfp4 ? 0.16 : 0.065;
    if (Scheme::id == qp::method::int8_per_channel_weight_only) return 0.035;
    if (Scheme::id == qp::method::mxfp8) return 0.07;
    if (Scheme::id == qp::method::lut_b_moe) return 0.4;
    return Scheme::id == qp::method::mxfp4 ? 0.38 : 0.3;
  } else {
    using layer = cpu::scaled_linear_layer<Scheme, typename Pair::activation>;
    const bool coarse = layer::weights == cpu::weight_scales::per_tensor || layer::activation == cpu::activation_quant::per_tensor;
    if (moe) return coarse ? 0.11 : 0.09;
    return coarse ? 0.08 : 0.065;
  }
}

/// The outputs of a layer's vectorized and reference paths, against the float32 pass: each stays in the
/// bound (their sums may differ in order, fp8-numerics §10 and low-precision §9).
template <class Scheme>
void check_paths(const std::vector<std::uint16_t>& fast, const std::vector<std::uint16_t>& slow, const std::vector<float>& ref,
                 double bound) {
  for (const auto* out : {&fast, &slow}) {
    const double err = relative_error(*out, ref);
    INFO((out == &fast ? "vectorized" : "reference") << " path: relative error " << err << " (bound " << bound << ")");
    CHECK(err == err);
    CHECK(err <= bound);
    CHECK(err > 0.005);  // it is quantized: an error this small would mean the float path ran
  }
}

struct linear_case {
  const char* what;
  std::int64_t out_features, in_features;  // a real layer's shape, divided by 4
};
// Llama-3.1-8B (qkv_proj [6144, 4096], o_proj [4096, 4096], gate_up [28672, 4096], down [4096, 14336])
// and Qwen3-30B-A3B attention (qkv_proj [5120, 2048], o_proj [2048, 4096]), each dimension / 4.
const linear_case linear_cases[] = {{"llama qkv_proj", 1536, 1024}, {"llama o_proj", 1024, 1024},
                                    {"llama gate_up_proj", 7168, 1024}, {"llama down_proj", 1024, 3584},
                                    {"qwen3 qkv_proj", 1280, 512}, {"qwen3 o_proj", 512, 1024}};
}  // namespace

TEMPLATE_LIST_TEST_CASE("linear layers of every scheme: both kernel paths, error near the float32 pass", "[forward]",
                        qpolicy::test::linear_layer_pairs) {
  using Scheme = typename TestType::scheme;
  using Act = typename TestType::activation;
  constexpr double bound = error_bound<TestType, qp::layer_kind::linear>();
  const auto& c = GENERATE(from_range(std::begin(linear_cases), std::end(linear_cases)));
  std::mt19937 rng(static_cast<unsigned>(11 + c.out_features));
  INFO(Scheme::name << " " << c.what << " [" << c.out_features << ", " << c.in_features << "]");
  const auto w = random_bf16(c.out_features, c.in_features, 0.02f, rng);
  const auto x = random_bf16(16, c.in_features, 1.0f, rng);
  std::vector<float> bias(static_cast<std::size_t>(c.out_features));
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = 0.01f * static_cast<float>(i % 7);
  const cpu::linear_layer<Scheme, Act> layer = cpu::quantize_linear<Scheme, Act>(w.view(), bias.data());
  std::vector<std::uint16_t> fast(static_cast<std::size_t>(16 * c.out_features)), slow(fast.size());
  cpu::linear_forward(layer, x.view(), fast.data());
  cpu::linear_forward(layer, x.view(), slow.data(), {cpu::kernel_path::reference, 1});
  std::vector<float> ref(fast.size());
  cpu::linear_forward_f32(w.view(), bias.data(), x.view(), ref.data());
  check_paths<Scheme>(fast, slow, ref, bound);
}

TEMPLATE_LIST_TEST_CASE("MoE layers of every scheme: both kernel paths, error near the float32 pass", "[forward]",
                        qpolicy::test::moe_layer_pairs) {
  using Scheme = typename TestType::scheme;
  using Act = typename TestType::activation;
  constexpr double bound = error_bound<TestType, qp::layer_kind::moe>();
  INFO(Scheme::name);
  // Qwen3-30B-A3B's experts (E=128, H=2048, I=768, top-8) at E=16, H=512, I=192 (not a multiple of
  // 128: the block scheme pads), top-4, 64 tokens.
  const std::int64_t experts = 16, hidden = 512, inter = 192, top_k = 4, tokens = 64;
  std::mt19937 rng(5);
  const auto w13 = random_bf16(experts * 2 * inter, hidden, 0.03f, rng);
  const auto w2 = random_bf16(experts * hidden, inter, 0.03f, rng);
  const auto x = random_bf16(tokens, hidden, 1.0f, rng);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens * top_k));
  std::vector<float> weights(ids.size());
  std::uniform_int_distribution<int> pick(0, static_cast<int>(experts) - 1);
  for (std::int64_t t = 0; t < tokens; ++t) {
    float total = 0;
    for (std::int64_t j = 0; j < top_k; ++j) {
      int e;
      bool again;
      do {  // distinct experts per token, as a top-k router gives
        e = pick(rng);
        again = false;
        for (std::int64_t q = 0; q < j; ++q) again |= ids[static_cast<std::size_t>(t * top_k + q)] == e;
      } while (again);
      ids[static_cast<std::size_t>(t * top_k + j)] = e;
      total += weights[static_cast<std::size_t>(t * top_k + j)] = 1.0f + static_cast<float>(j);
    }
    for (std::int64_t j = 0; j < top_k; ++j) weights[static_cast<std::size_t>(t * top_k + j)] /= total;
  }
  const cpu::routing route{ids.data(), weights.data(), top_k};
  const cpu::moe_layer<Scheme, Act> layer = cpu::quantize_moe<Scheme, Act>(w13.view(), w2.view(), experts);
  if constexpr (std::is_same_v<Scheme, qp::fp8_per_block>) {  // the fast padded blocking = the reference's
    std::vector<std::uint8_t> q13(layer.w13.size()), q2(layer.w2.size());
    std::vector<float> s13(layer.s13.size()), s2(layer.s2.size());
    cpu::reference::moe_per_block(w13.view(), w2.view(), experts, {}, q13.data(), s13.data(), q2.data(), s2.data());
    REQUIRE(q13 == layer.w13);
    REQUIRE(q2 == layer.w2);
    REQUIRE(std::memcmp(s13.data(), layer.s13.data(), s13.size() * sizeof(float)) == 0);
    REQUIRE(std::memcmp(s2.data(), layer.s2.data(), s2.size() * sizeof(float)) == 0);
  }
  std::vector<std::uint16_t> fast(static_cast<std::size_t>(tokens * hidden)), slow(fast.size());
  cpu::moe_forward(layer, x.view(), route, fast.data());
  cpu::moe_forward(layer, x.view(), route, slow.data(), {cpu::kernel_path::reference, 1});
  std::vector<float> ref(fast.size());
  cpu::moe_forward_f32(w13.view(), w2.view(), experts, x.view(), route, ref.data());
  check_paths<Scheme>(fast, slow, ref, bound);

  // An expert id out of range is named.
  ids[5] = 16;
  try {
    cpu::moe_forward(layer, x.view(), route, fast.data());
    FAIL("no error for expert 16");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) == "moe_forward: token 1 is routed to expert 16, but the layer has experts 0..15");
  }
}

TEST_CASE("forward passes refuse what they cannot run, saying why", "[forward]") {
  using cpu::activation_quant;
  using cpu::weight_scales;
  CHECK(cpu::can_implement(weight_scales::block_128x128, activation_quant::group_128, 4096).empty());
  CHECK(cpu::can_implement(weight_scales::block_128x128, activation_quant::group_128, 4100) ==
        "128x128 weight blocks need K (the input features) to be a multiple of 128 (1x128 activation groups), got 4100");
  CHECK(cpu::can_implement(weight_scales::block_128x128, activation_quant::per_token, 4096) ==
        "128x128 weight blocks need 1x128 activation groups, not per-token activations");
  CHECK(cpu::can_implement(weight_scales::per_channel, activation_quant::group_128, 4096) ==
        "1x128 activation groups need 128x128 weight blocks (the block-scaled GEMM); these weights are per-channel");
  std::mt19937 rng(1);
  const auto w = random_bf16(256, 200, 0.02f, rng);
  CHECK_THROWS_WITH(cpu::quantize_linear<qp::fp8_per_block>(w.view(), nullptr),
                    "linear layer: 128x128 weight blocks need K (the input features) to be a multiple of 128 (1x128 activation "
                    "groups), got 200");
  const auto layer = cpu::quantize_linear<qp::fp8_per_tensor>(w.view(), nullptr);
  const auto x = random_bf16(4, 128, 1.0f, rng);
  std::vector<std::uint16_t> out(4 * 256);
  CHECK_THROWS_WITH(cpu::linear_forward(layer, x.view(), out.data()),
                    "linear_forward: the input has 128 features per row, the layer takes 200");
  // A runtime plan's activation key becomes a tag in the dispatch: a key without a quantizer is named
  // there, and a pairing the layer types refuse is refused with the pairing rule's sentence.
  qp::layer_plan lp;
  lp.decided = qp::method::fp8_per_block;
  lp.activation = qp::activation_kind::key;
  lp.activation_key = qp::key_id::mxfp8_dynamic;
  CHECK_THROWS_WITH(qp::with_activation(lp, qp::layer_kind::linear, [](auto) {}),
                    "activation key mxfp8 has no FP8 activation quantizer (fp8_per_token, fp8_per_tensor_dynamic, "
                    "fp8_per_block_dynamic have one)");
  lp.activation_key = qp::key_id::fp8_per_token;
  auto run_block = [&]<class Act>(Act) {
    if constexpr (!cpu::pairs_with<qp::fp8_per_block, Act>) cpu::refuse_pairing<qp::fp8_per_block, Act>("layer x");
  };
  CHECK_THROWS_WITH(qp::with_activation(lp, qp::layer_kind::linear, run_block),
                    "layer x: 128x128 weight blocks need 1x128 activation groups, not per-token activations");
  lp.activation = qp::activation_kind::method_default;
  CHECK_NOTHROW(qp::with_activation(lp, qp::layer_kind::moe, run_block));
  const auto w13 = random_bf16(2 * 4 * 64, 128, 0.02f, rng), w2 = random_bf16(4 * 100, 64, 0.02f, rng);
  CHECK_THROWS_WITH(cpu::quantize_moe<qp::fp8_per_tensor>(w13.view(), w2.view(), 4),
                    "MoE: w2 is [400, 64], expected [E * H, I] = [512, 64]");
}

#include "qpolicy/kernels/cuda/gemm.hpp"

TEST_CASE("CUDA GEMM problems are checked before launch, with the broken constraint named", "[gemm]") {
  namespace cuda = qpolicy::cuda;
  using fp8::activation_quant;
  using fp8::weight_scales;
  alignas(16) static std::uint8_t a[16], w[16];
  alignas(16) static float sa[16], sw[16];
  alignas(16) static std::uint16_t out[16];
  const cuda::gemm_operands op{a, sa, w, sw, 0, nullptr, out};
  const cuda::gemm_problem tensor{64, 256, 512, activation_quant::per_tensor, weight_scales::per_tensor, false};
  CHECK(cuda::gemm_check(tensor, op).empty());
  CHECK(cuda::cublaslt_can_implement(tensor, op, 90).empty());
  CHECK(cuda::cublaslt_can_implement(tensor, op, 80) ==
        "cuBLASLt FP8 matmuls need compute capability 8.9 or newer, this device is sm_80");
  CHECK(cuda::cublaslt_can_implement({64, 256, 520, activation_quant::per_tensor, weight_scales::per_tensor, false}, op, 90) ==
        "cuBLASLt's FP8 TN layout needs K % 16 == 0 (16-byte rows), got K=520");
  CHECK(cuda::cublaslt_can_implement({64, 100, 512, activation_quant::per_tensor, weight_scales::per_tensor, false}, op, 90) ==
        "cuBLASLt needs N % 8 == 0 (16-byte rows of the bf16 output), got N=100");
  CHECK(cuda::gemm_check({64, 256, 512, activation_quant::per_token, weight_scales::block_128x128, false}, op) ==
        "128x128 weight blocks need 1x128 activation groups, not per-token activations");
  const cuda::gemm_problem blocks{6, 256, 640, activation_quant::group_128, weight_scales::block_128x128, false};
  cuda::gemm_operands bop = op;
  bop.w_scale_stride = 5;  // K/128 = 5: the plain grid
  CHECK(cuda::gemm_check(blocks, bop).empty());
  CHECK(cuda::cublaslt_can_implement(blocks, bop, 90) ==
        "cuBLASLt's 1x128 activation scales need M % 4 == 0 (16-byte scale columns), got M=6");
  CHECK(cuda::cublaslt_can_implement({8, 256, 640, activation_quant::group_128, weight_scales::block_128x128, false}, bop, 90) ==
        "cuBLASLt reads 128x128 weight scales with a row stride of 8 (K/128 rounded up to 4), got 5");
  CHECK(cuda::cublaslt_can_implement({8, 256, 640, activation_quant::group_128, weight_scales::block_128x128, false}, bop, 100) ==
        "cuBLASLt's 128-wide block scaling (VEC128_32F / BLK128x128_32F) is a Hopper (sm_90) mode; this device is sm_100");
  CHECK(cuda::gemm_check({8, 256, 200, activation_quant::group_128, weight_scales::block_128x128, false}, bop) ==
        "128x128 weight blocks need K (the input features) to be a multiple of 128 (1x128 activation groups), got 200");
  CHECK(cuda::gemm_check({0, 256, 512, activation_quant::per_tensor, weight_scales::per_tensor, false}, op) ==
        "GEMM sizes must be positive, got M=0 N=256 K=512");
  CHECK(cuda::gemm_check({8, 256, 512, activation_quant::per_tensor, weight_scales::per_tensor, true}, op) ==
        "the problem has a bias but no bias pointer was given");
}
