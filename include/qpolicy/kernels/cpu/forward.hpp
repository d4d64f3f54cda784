#pragma once
// Forward passes of quantized layers on the CPU, specialized on the scheme tag and the activation tag.
// One layer type per kind, linear_layer<Scheme, Act> and moe_layer<Scheme, Act>, whose GEMM the scheme
// row says: the scaled FP8 GEMM (this header: quantize the activation with Act's key, FP8 GEMM with
// Scheme's scales) or the weight-only GEMM (weight_only_forward.hpp: Act is the row's activation
// treatment). A MoE layer routes tokens to experts and runs w13, SiLU-and-mul and w2 per expert as such
// GEMMs, then sums each token's experts with its routing weights. The same calls for every scheme:
//   auto layer = cpu::quantize_linear<qp::fp8_per_block>(weight_view, bias);   // Act: the row's default
//   cpu::linear_forward(layer, x_view, out_bf16);
// Everything a scheme needs comes from its contract (schemes/contract.hpp): the weight key and its
// kernel, the scale layout, the GEMM, the MoE w13 formula and padding. The vectorized kernels and the
// reference kernels run the same steps and give the same bits; `moe_forward_f32` / `linear_forward_f32`
// are the unquantized float32 passes the accuracy tests and the demo compare against.
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "qpolicy/kernels/cpu/detail/scratch.hpp"
#include "qpolicy/kernels/cpu/gemm_reference.hpp"
#include "qpolicy/kernels/cpu/detail/gemm_tiled.hpp"
#include "qpolicy/numerics/gemm_desc.hpp"
#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/schemes/contract.hpp"
#include "qpolicy/schemes/formulas.hpp"
#include "qpolicy/schemes/tags.hpp"
#include "qpolicy/kernels/cpu/reference.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"

namespace qpolicy::cpu {

using fp8::activation_quant;
using fp8::weight_scales;

/// Whether a scheme's layers run the weight-only GEMM (its row's GEMM kind).
template <class Scheme>
inline constexpr bool is_weight_only = schemes::is_weight_only(Scheme::id);

namespace detail {
/// A scheme's default activation key for a layer kind, from its contract. A scheme without kernels
/// gets a placeholder here: the layer types' static_asserts then say what is wrong, in a sentence.
template <class Scheme>
constexpr key_id default_activation(layer_kind kind) {
  const auto key = schemes::default_activation(Scheme::id, kind);
  return schemes::has_fp8_gemm(Scheme::id) && key ? *key : key_id::fp8_per_tensor_dynamic;
}
/// A layer kind's default activation tag: the row's activation key (scaled FP8 GEMM) or its treatment
/// (weight-only GEMM).
template <class Scheme, layer_kind Kind>
struct default_activation_tag {
  using type = key_tag<default_activation<Scheme>(Kind)>;
};
template <class Scheme, layer_kind Kind>
  requires is_weight_only<Scheme>
struct default_activation_tag<Scheme, Kind> {
  using type = treatment_tag<schemes::treatment_of(Scheme::id, Kind)>;
};
template <class Scheme, class Act>
constexpr bool pairs() {
  return schemes::has_activation(Act::id) &&
         schemes::check_pairing(*schemes::contract_of(Scheme::id).scales, schemes::activation_quant_of(Act::id),
                                schemes::block_k) == schemes::pairing::ok;
}
}  // namespace detail

/// Scheme's default activation tags per layer kind: its row's activation key (spec §10's table, for a
/// device without CUTLASS FP8: fp8_per_tensor layers quantize activations per tensor), or for the
/// weight-only schemes its row's activation treatment.
template <class Scheme>
using linear_activation = typename detail::default_activation_tag<Scheme, layer_kind::linear>::type;
template <class Scheme>
using moe_activation = typename detail::default_activation_tag<Scheme, layer_kind::moe>::type;

/// What every forward layer type checks about its scheme and activation key, each as a sentence
/// (tests/compile_fail holds one case per sentence).
template <class Scheme, class Act>
struct forward_pairing {
  static_assert(!is_weight_only<Scheme>,
                "scaled_linear_layer and scaled_moe_layer run the scaled FP8 GEMM; a weight-only scheme's layers are "
                "weight_only_linear_layer and weight_only_moe_layer (linear_layer and moe_layer pick the one its row says)");
  static_assert(is_weight_only<Scheme> || schemes::has_fp8_gemm(Scheme::id),
                "this scheme has no forward pass: it quantizes nothing (only the methods of the scheme contract do)");
  static_assert(!schemes::has_fp8_gemm(Scheme::id) || schemes::has_activation(Act::id),
                "the activation of a forward pass must be a dynamic activation key with a quantizer");
  static_assert(!schemes::has_fp8_gemm(Scheme::id) || !schemes::has_activation(Act::id) || detail::pairs<Scheme, Act>(),
                "128x128 weight blocks pair with 1x128 activation groups (fp8_per_block_dynamic) and only with them");
  // Guarded, so that a failed assertion above is the only error shown.
  static constexpr weight_scales weights =
      schemes::has_fp8_gemm(Scheme::id) ? *schemes::contract_of(Scheme::id).scales : weight_scales::per_tensor;
  static constexpr activation_quant activation =
      schemes::has_activation(Act::id) ? schemes::activation_quant_of(Act::id) : activation_quant::per_tensor;
  static constexpr bool blocks = weights == weight_scales::block_128x128;
};

/// Whether a scheme (method tag) has layers here (a forward pass), and a linear one.
template <class Scheme>
inline constexpr bool has_layers = schemes::has_kernels(Scheme::id);
template <class Scheme>
inline constexpr bool has_linear_layer = has_layers<Scheme> && schemes::contract_of(Scheme::id).linear;

/// Whether Scheme's layers take activation tag Act: for the scaled FP8 GEMM, an activation key whose
/// scales pair with the weights'; for the weight-only GEMM, an activation treatment.
template <class Scheme, class Act>
inline constexpr bool pairs_with = [] {
  if constexpr (is_weight_only<Scheme>) return is_treatment_tag<Act>;
  else if constexpr (is_treatment_tag<Act>) return false;
  else return schemes::has_fp8_gemm(Scheme::id) && detail::pairs<Scheme, Act>();
}();

/// For a runtime plan that asks for a pairing the layer types refuse: throws std::invalid_argument
/// "WHAT: " and the pairing rule's sentence.
template <class Scheme, class Act>
[[noreturn]] void refuse_pairing(const std::string& what) {
  throw std::invalid_argument(what + ": " + (schemes::has_fp8_gemm(Scheme::id) && schemes::has_activation(Act::id)
                                                 ? schemes::pairing_sentence(*schemes::contract_of(Scheme::id).scales,
                                                                             schemes::activation_quant_of(Act::id), schemes::block_k)
                                                 : std::string("this scheme has no forward pass in this build")));
}

/// Which kernels a forward pass runs: the vectorized ones or the reference ones (the same bits).
enum class kernel_path : std::uint8_t { vectorized, reference };

/// Options of a forward pass.
struct forward_options {
  kernel_path path = kernel_path::vectorized;
  unsigned threads = 0;  // 0: the hardware's count
  std::int64_t hadamard_size = 0;  // a rotating linear layer's rotation block (the plan's hadamard_size); 0: 32
};

/// A linear layer of the scaled FP8 GEMM: its weight [out_features, in_features], quantized for
/// Scheme, run with activation key Act (linear_layer<Scheme, Act> names it for those schemes).
template <class Scheme, class Act = linear_activation<Scheme>>
struct scaled_linear_layer : forward_pairing<Scheme, Act> {
  using scheme = Scheme;
  using activation_key = Act;
  std::int64_t out_features = 0, in_features = 0;
  std::vector<std::uint8_t> codes;  // [out, in]
  std::vector<float> scales;        // the weight key's scale grid
  std::vector<float> bias;          // [out] or empty
};

/// A MoE layer of the scaled FP8 GEMM, its experts quantized: w13 [E, 2I, H] (gate rows then up rows)
/// and w2 [E, H, I]. Block schemes pad I and H to 128 (spec §9): gate rows at [0, I), up rows at [Ip, Ip + I).
template <class Scheme, class Act = moe_activation<Scheme>>
struct scaled_moe_layer : forward_pairing<Scheme, Act> {
  using scheme = Scheme;
  using activation_key = Act;
  std::int64_t experts = 0, hidden = 0, intermediate = 0;
  std::int64_t hidden_padded = 0, intermediate_padded = 0;  // == hidden / intermediate unless blocked
  std::int64_t s13_step = 0, s2_step = 0;                   // scales per expert
  std::vector<std::uint8_t> w13, w2;
  std::vector<float> s13, s2;
};

/// Empty when the GEMM of these weights and this activation quantizer can run on [*, in_features]
/// inputs, else the reason (schemes::pairing_sentence: the one pairing rule).
std::string can_implement(weight_scales weights, activation_quant activation, std::int64_t in_features);

/// Token routing: for token t, experts ids[t * top_k + j] with weights weights[t * top_k + j].
struct routing {
  const std::int32_t* ids = nullptr;
  const float* weights = nullptr;
  std::int64_t top_k = 0;
};

/// Tokens grouped per expert: slot s = t * top_k + j goes to row row_of_slot[s]; expert e's rows are
/// [first[e], first[e + 1]), in token order (a per-tensor activation scale covers an expert's rows).
struct routing_plan {
  std::vector<std::int64_t> first, token_of_row, row_of_slot;
};
/// Plans the routing of `tokens` tokens; throws std::invalid_argument naming an expert id out of range.
routing_plan plan_routing(const routing& route, std::int64_t tokens, std::int64_t experts);

/// The unquantized passes in float32: out = x W^T + bias, and the MoE pass over the original experts
/// (float32 weights used in place, others widened on each call).
void linear_forward_f32(const input_view& w, const float* bias, const input_view& x, float* out,
                        const forward_options& options = {});
void moe_forward_f32(const input_view& w13, const input_view& w2, std::int64_t experts,
                     const input_view& x, const routing& route, float* out, const forward_options& options = {});

namespace detail {

/// Throws std::invalid_argument "WHAT: REASON" when can_implement refuses.
void check_implementable(weight_scales weights, activation_quant activation, std::int64_t in_features, const char* what);
/// x's elements widened to float32.
scratch_vector<float> widen_all(const input_view& x);
/// Writes float32 values as bf16 bits.
void store_bf16(std::span<const float> from, std::uint16_t* out);
/// Adds bias[n] to every row of out[rows, n].
void add_bias(float* out, std::int64_t rows, std::int64_t n, const float* bias);

/// A MoE layer's sizes, checked: w13 [E * 2I, H] and w2 [E * H, I].
struct moe_shape {
  std::int64_t experts, hidden, inter;
};
moe_shape check_moe_shape(const input_view& w13, const input_view& w2, std::int64_t experts);

/// Expert e's projection: which == 13 multiplies [rows, hp] by w13 into [rows, 2 ip], which == 2
/// multiplies [rows, ip] by w2 into [rows, hp]; `threads` for the GEMM.
using expert_matmul = std::function<void(std::int64_t e, int which, const float* in, std::int64_t rows, float* out, unsigned threads)>;
/// The MoE pass shared by every scheme and the float32 pass: routing, per-expert w13, SiLU-and-mul,
/// w2, and the weighted sum per token into sum[T, H] (float32).
void run_moe(std::int64_t experts, std::int64_t hidden, std::int64_t inter, std::int64_t hp, std::int64_t ip,
             const input_view& x, const routing& route, bool round_intermediates, unsigned threads,
             const expert_matmul& matmul, float* sum);

/// out[rows, n] = quantize(x[rows, k]) with Act's quantizer, times Scheme's weights w [n, k] with
/// scales w_scales, + bias: float32 before the output rounding.
template <class Scheme, class Act>
void quantized_matmul(const float* x, std::int64_t rows, const std::uint8_t* w, const float* w_scales, std::int64_t n,
                      std::int64_t k, const float* bias, float* out, const forward_options& o) {
  using pairing = forward_pairing<Scheme, Act>;
  if (rows == 0) return;
  const input_view xv{x, element::f32, rows, k};
  scratch_vector<std::uint8_t> q(static_cast<std::size_t>(rows * k));
  const auto grid = schemes::scale_grid(Act::id, rows, k);
  scratch_vector<float> sa(static_cast<std::size_t>(grid[0] * grid[1]));
  const quantized_outputs qa{q.data(), sa.data(), nullptr};
  const bool vectorized = o.path == kernel_path::vectorized;
  if (vectorized) quantize<formula_of_key_t<Act>>(xv, qa, {}, cpu_options{o.threads});
  else reference::quantize<formula_of_key_t<Act>>(xv, qa);
  const gemm_options go{o.threads};
  if constexpr (pairing::blocks) {
    if (vectorized) gemm_blocked(q.data(), sa.data(), w, w_scales, rows, n, k, out, bias, go);
    else reference::gemm_blocked(q.data(), sa.data(), w, w_scales, rows, n, k, out);
  } else {
    constexpr bool a_rows = pairing::activation == activation_quant::per_token;
    constexpr bool w_rows = pairing::weights == weight_scales::per_channel;
    if (vectorized) gemm_scaled(q.data(), sa.data(), a_rows, w, w_scales, w_rows, rows, n, k, out, bias, go);
    else reference::gemm_scaled(q.data(), sa.data(), a_rows, w, w_scales, w_rows, rows, n, k, out);
  }
  if (!vectorized && bias) add_bias(out, rows, n, bias);
}

}  // namespace detail

/// Quantizes weight `w` ([out, in], bf16/fp16/fp32) with Scheme's weight formula; throws
/// std::invalid_argument with can_implement's reason when the layer cannot run.
template <class Scheme, class Act = linear_activation<Scheme>>
  requires(!is_weight_only<Scheme>)
scaled_linear_layer<Scheme, Act> quantize_linear(const input_view& w, const float* bias, const forward_options& options = {}) {
  using layer_t = scaled_linear_layer<Scheme, Act>;
  detail::check_implementable(layer_t::weights, layer_t::activation, w.cols, "linear layer");
  layer_t l;
  l.out_features = w.rows;
  l.in_features = w.cols;
  l.codes.resize(static_cast<std::size_t>(w.size()));
  constexpr key_id weight_key = schemes::contract_of(Scheme::id).weight_key;
  const auto grid = schemes::scale_grid(weight_key, w.rows, w.cols);
  l.scales.resize(static_cast<std::size_t>(grid[0] * grid[1]));
  quantize<formula_of_key_t<key_tag<weight_key>>>(w, {l.codes.data(), l.scales.data(), nullptr}, {}, {options.threads});
  if (bias) l.bias.assign(bias, bias + w.rows);
  return l;
}

/// out[M, out_features] (bf16 bits) = x[M, in_features] W^T + bias, activations quantized by Act.
template <class Scheme, class Act>
void linear_forward(const scaled_linear_layer<Scheme, Act>& layer, const input_view& x, std::uint16_t* out,
                    const forward_options& options = {}) {
  if (x.cols != layer.in_features)
    throw std::invalid_argument("linear_forward: the input has " + std::to_string(x.cols) +
                                " features per row, the layer takes " + std::to_string(layer.in_features));
  detail::check_implementable(layer.weights, layer.activation, layer.in_features, "linear_forward");
  const auto xf = detail::widen_all(x);
  detail::scratch_vector<float> y(static_cast<std::size_t>(x.rows * layer.out_features));
  detail::quantized_matmul<Scheme, Act>(xf.data(), x.rows, layer.codes.data(), layer.scales.data(), layer.out_features,
                                        layer.in_features, layer.bias.empty() ? nullptr : layer.bias.data(), y.data(), options);
  detail::store_bf16(y, out);
}

/// Quantizes experts (w13 viewed as [E * 2I, H], w2 as [E * H, I]) per spec §9: each expert's matrices
/// with the weight formula (w13 with the contract's MoE w13 formula where it has one), zero-padded to
/// whole 128x128 blocks first for block schemes.
template <class Scheme, class Act = moe_activation<Scheme>>
  requires(!is_weight_only<Scheme>)
scaled_moe_layer<Scheme, Act> quantize_moe(const input_view& w13, const input_view& w2, std::int64_t experts,
                                    const forward_options& options = {}) {
  using layer_t = scaled_moe_layer<Scheme, Act>;
  constexpr auto& contract = schemes::contract_of(Scheme::id);
  using key13 = key_tag<contract.moe_w13_key.value_or(contract.weight_key)>;
  using key2 = key_tag<contract.weight_key>;
  const auto s = detail::check_moe_shape(w13, w2, experts);
  layer_t m;
  m.experts = experts;
  m.hidden = s.hidden;
  m.intermediate = s.inter;
  const std::int64_t pad = contract.moe_pads ? contract.moe_multiple : 1;  // block schemes: whole 128x128 blocks (§9)
  const std::int64_t hp = (s.hidden + pad - 1) / pad * pad, ip = (s.inter + pad - 1) / pad * pad;
  m.hidden_padded = hp;
  m.intermediate_padded = ip;
  detail::check_implementable(layer_t::weights, layer_t::activation, hp, "MoE w13");
  detail::check_implementable(layer_t::weights, layer_t::activation, ip, "MoE w2");
  const auto g13 = schemes::scale_grid(key13::id, 2 * ip, hp), g2 = schemes::scale_grid(key2::id, hp, ip);
  m.s13_step = g13[0] * g13[1];
  m.s2_step = g2[0] * g2[1];
  m.w13.resize(static_cast<std::size_t>(experts * 2 * ip * hp));
  m.w2.resize(static_cast<std::size_t>(experts * hp * ip));
  m.s13.resize(static_cast<std::size_t>(experts * m.s13_step));
  m.s2.resize(static_cast<std::size_t>(experts * m.s2_step));
  const cpu_options co{options.threads};
  std::vector<float> pad13, pad2;
  if (pad > 1) {
    pad13.resize(static_cast<std::size_t>(2 * ip * hp));
    pad2.resize(static_cast<std::size_t>(hp * ip));
  }
  for (std::int64_t e = 0; e < experts; ++e) {
    input_view x13 = w13.rows_from(e * 2 * s.inter, 2 * s.inter), x2 = w2.rows_from(e * s.hidden, s.hidden);
    if (pad > 1) {  // spec §9: the expert's matrices zero-padded (bit-identical to reference::moe_per_block)
      reference::moe_pad_expert(w13, w2, e, s.inter, s.hidden, pad13.data(), pad2.data());
      x13 = {pad13.data(), element::f32, 2 * ip, hp};
      x2 = {pad2.data(), element::f32, hp, ip};
    }
    quantize<formula_of_key_t<key13>>(x13, {m.w13.data() + e * 2 * ip * hp, m.s13.data() + e * m.s13_step, nullptr}, {}, co);
    quantize<formula_of_key_t<key2>>(x2, {m.w2.data() + e * hp * ip, m.s2.data() + e * m.s2_step, nullptr}, {}, co);
  }
  return m;
}

/// out[T, H] (bf16 bits): for each token, the sum over its experts (in top-k order) of weight *
/// w2(silu(gate) * up). Tokens are grouped per expert in token order (a per-tensor activation scale
/// covers an expert's whole group). Throws std::invalid_argument for an expert id out of range.
template <class Scheme, class Act>
void moe_forward(const scaled_moe_layer<Scheme, Act>& layer, const input_view& x, const routing& route, std::uint16_t* out,
                 const forward_options& options = {}) {
  const std::int64_t hp = layer.hidden_padded, ip = layer.intermediate_padded;
  detail::check_implementable(layer.weights, layer.activation, hp, "moe_forward w13");
  detail::check_implementable(layer.weights, layer.activation, ip, "moe_forward w2");
  detail::scratch_vector<float> sum(static_cast<std::size_t>(x.rows * layer.hidden));
  detail::run_moe(layer.experts, layer.hidden, layer.intermediate, hp, ip, x, route, true, options.threads,
                  [&](std::int64_t e, int which, const float* in, std::int64_t rows, float* o, unsigned threads) {
                    forward_options inner = options;
                    inner.threads = threads;
                    if (which == 13)
                      detail::quantized_matmul<Scheme, Act>(in, rows, layer.w13.data() + e * 2 * ip * hp,
                                                            layer.s13.data() + e * layer.s13_step, 2 * ip, hp, nullptr, o, inner);
                    else
                      detail::quantized_matmul<Scheme, Act>(in, rows, layer.w2.data() + e * hp * ip,
                                                            layer.s2.data() + e * layer.s2_step, hp, ip, nullptr, o, inner);
                  },
                  sum.data());
  detail::store_bf16(sum, out);
}

}  // namespace qpolicy::cpu

// The weight-only layers, and linear_layer / moe_layer, which name either kind.
#include "qpolicy/kernels/cpu/weight_only_forward.hpp"
