#pragma once
// Forward passes of quantized layers on the CPU: a linear layer is "quantize the activation, FP8 GEMM
// with the scheme's scales, bf16 out"; a MoE layer routes tokens to experts and runs w13, SiLU-and-mul
// and w2 per expert as FP8 GEMMs, then sums each token's experts with its routing weights.
//   auto layer = cpu::quantize_linear<qp::fp8_per_block>(weight_view, bias, activation);
//   cpu::linear_forward<qp::fp8_per_block>(layer, x_view, out_bf16);
// The fast path (gemm_fast, the fast quantizers) and the reference path (reference kernels and GEMMs)
// run the same steps and give the same bits; `moe_forward_f32` / `linear_forward_f32` are the
// unquantized float32 passes the accuracy tests and the demo compare against.
#include <cstdint>
#include <string>
#include <vector>

#include "qpolicy/numerics/gemm_desc.hpp"
#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/keys/quant_key.hpp"
#include "qpolicy/schemes/contract.hpp"
#include "qpolicy/schemes/tags.hpp"

namespace qpolicy::cpu {

using fp8::activation_quant;
using fp8::weight_scales;

/// What a scheme's weights are and which activation quantizer it uses by default (spec §10's table,
/// for a device without CUTLASS FP8: fp8_per_tensor linear layers quantize activations per tensor).
template <class Scheme>
struct scheme_traits {
  static_assert(sizeof(Scheme) == 0, "no FP8 forward pass for this scheme (fp8_per_tensor, fp8_per_channel, fp8_per_block)");
};
template <>
struct scheme_traits<fp8_per_tensor> {
  static constexpr weight_scales weights = weight_scales::per_tensor;
  static constexpr activation_quant linear_activation = activation_quant::per_tensor;
  static constexpr activation_quant moe_activation = activation_quant::per_tensor;
};
template <>
struct scheme_traits<fp8_per_channel> {
  static constexpr weight_scales weights = weight_scales::per_channel;
  static constexpr activation_quant linear_activation = activation_quant::per_token;
  static constexpr activation_quant moe_activation = activation_quant::per_token;
};
template <>
struct scheme_traits<fp8_per_block> {
  static constexpr weight_scales weights = weight_scales::block_128x128;
  static constexpr activation_quant linear_activation = activation_quant::group_128;
  static constexpr activation_quant moe_activation = activation_quant::group_128;
};

/// Whether a scheme (method tag) has an FP8 forward pass here.
template <class Scheme>
inline constexpr bool has_forward = false;
template <>
inline constexpr bool has_forward<fp8_per_tensor> = true;
template <>
inline constexpr bool has_forward<fp8_per_channel> = true;
template <>
inline constexpr bool has_forward<fp8_per_block> = true;

/// The activation quantizer of an explicit activation key (fp8_per_token, fp8_per_tensor_dynamic,
/// fp8_per_block_dynamic); throws std::invalid_argument naming any other key.
activation_quant activation_of_key(key_id key);

/// Which kernels a forward pass runs: the fast ones or the reference ones (the same bits).
enum class kernel_path : std::uint8_t { fast, reference };

/// Options of a forward pass.
struct forward_options {
  kernel_path path = kernel_path::fast;
  unsigned threads = 0;  // 0: the hardware's count
};

/// A linear layer's weight [out_features, in_features], quantized.
struct fp8_linear {
  weight_scales weights = weight_scales::per_tensor;
  activation_quant activation = activation_quant::per_tensor;
  std::int64_t out_features = 0, in_features = 0;
  std::vector<std::uint8_t> codes;  // [out, in]
  std::vector<float> scales;        // [1], [out] or [ceil(out/128), ceil(in/128)]
  std::vector<float> bias;          // [out] or empty
};

/// Empty when the GEMM of these weights and this activation quantizer can run on [*, in_features]
/// inputs, else the reason (block scales need 1x128 activation groups and in_features % 128 == 0;
/// per-tensor / per-channel weights take per-tensor or per-token activations).
std::string can_implement(weight_scales weights, activation_quant activation, std::int64_t in_features);

/// Quantizes weight `w` ([out, in], bf16/fp16/fp32) for a scheme's linear GEMM; throws
/// std::invalid_argument with can_implement's reason when the combination cannot run.
fp8_linear quantize_linear(weight_scales weights, activation_quant activation, const fp8::input_view& w,
                           const float* bias, const forward_options& options = {});
template <class Scheme>
fp8_linear quantize_linear(const fp8::input_view& w, const float* bias,
                           activation_quant activation = scheme_traits<Scheme>::linear_activation,
                           const forward_options& options = {}) {
  return quantize_linear(scheme_traits<Scheme>::weights, activation, w, bias, options);
}

/// out[M, out_features] (bf16 bits) = x[M, in_features] W^T + bias, activations quantized per `layer`.
void linear_forward(const fp8_linear& layer, const fp8::input_view& x, std::uint16_t* out,
                    const forward_options& options = {});
template <class Scheme>
void linear_forward(const fp8_linear& layer, const fp8::input_view& x, std::uint16_t* out,
                    const forward_options& options = {}) {
  static_assert(sizeof(scheme_traits<Scheme>) > 0);
  linear_forward(layer, x, out, options);
}
/// The unquantized pass in float32: out = x W^T + bias (float32 weights are used in place, others
/// widened on each call).
void linear_forward_f32(const fp8::input_view& w, const float* bias, const fp8::input_view& x, float* out,
                        const forward_options& options = {});

/// A MoE layer's experts, quantized: w13 [E, 2I, H] (gate rows then up rows) and w2 [E, H, I]. Block
/// schemes pad I and H to 128 (spec §9): gate rows at [0, I), up rows at [Ip, Ip + I).
struct fp8_moe {
  weight_scales weights = weight_scales::per_tensor;
  activation_quant activation = activation_quant::per_tensor;
  std::int64_t experts = 0, hidden = 0, intermediate = 0;
  std::int64_t hidden_padded = 0, intermediate_padded = 0;  // == hidden / intermediate unless blocked
  std::vector<std::uint8_t> w13, w2;
  std::vector<float> s13, s2;  // per expert: [1], [rows] or the block grid
};

/// Quantizes experts: w13 viewed as [E * 2I, H], w2 as [E * H, I].
fp8_moe quantize_moe(weight_scales weights, activation_quant activation, const fp8::input_view& w13,
                     const fp8::input_view& w2, std::int64_t experts, const forward_options& options = {});
template <class Scheme>
fp8_moe quantize_moe(const fp8::input_view& w13, const fp8::input_view& w2, std::int64_t experts,
                     activation_quant activation = scheme_traits<Scheme>::moe_activation,
                     const forward_options& options = {}) {
  return quantize_moe(scheme_traits<Scheme>::weights, activation, w13, w2, experts, options);
}

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

/// out[T, H] (bf16 bits): for each token, the sum over its experts (in top-k order) of weight *
/// w2(silu(gate) * up). Tokens are grouped per expert in token order (a per-tensor activation scale
/// covers an expert's whole group). Throws std::invalid_argument for an expert id out of range.
void moe_forward(const fp8_moe& layer, const fp8::input_view& x, const routing& route, std::uint16_t* out,
                 const forward_options& options = {});
template <class Scheme>
void moe_forward(const fp8_moe& layer, const fp8::input_view& x, const routing& route, std::uint16_t* out,
                 const forward_options& options = {}) {
  static_assert(sizeof(scheme_traits<Scheme>) > 0);
  moe_forward(layer, x, route, out, options);
}
/// The unquantized pass in float32 over the original experts (float32 weights used in place).
void moe_forward_f32(const fp8::input_view& w13, const fp8::input_view& w2, std::int64_t experts,
                     const fp8::input_view& x, const routing& route, float* out, const forward_options& options = {});

}  // namespace qpolicy::cpu
