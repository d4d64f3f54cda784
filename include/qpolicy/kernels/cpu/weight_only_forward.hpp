#pragma once
// Forward passes of the weight-only schemes on the CPU, as vLLM runs them on Hopper: weight-only GEMMs
// over weights quantized once by the scheme's weight formula (MXFP8 and INT8: W8A16; MXFP4 and NVFP4:
// W4A16), with the activation treatment of the scheme's row -- none, MXFP4 quantize-dequantize (the
// MoE emulation backend) or NVFP4 per-token codes (emulating Blackwell's TRT-LLM MoE). The same calls as
// the scaled FP8 layers (kernels/cpu/forward.hpp, which includes this header):
//   auto layer = cpu::quantize_moe<qp::nvfp4_per_token>(w13, w2, experts);
//   cpu::moe_forward(layer, x, route, out_bf16);
// Two paths with the same operands: the reference (plain loops, float32 sums in K order) and the fast
// one (weights decoded to float panels, the blocked float32 GEMM); both meet spec §9's bound.
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "qpolicy/kernels/cpu/forward.hpp"
#include "qpolicy/kernels/cpu/block_quantizer.hpp"
#include "qpolicy/numerics/detail/quantize_blocks.hpp"
#include "qpolicy/schemes/formulas.hpp"

namespace qpolicy::cpu {

/// One weight matrix quantized by a low-precision weight formula, as the formula stores it (row-major).
struct quantized_matrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<std::uint8_t> codes, block_scales, codebook;  // codebook: LUT-B's, 8 e4m3 bytes a tile
  std::vector<float> row_scales;  // INT8's per-row scales
  float tensor_scale = 1.0f;      // NVFP4's weight_scale_2
};

namespace detail {

/// A low-precision scheme's weight formula tag.
template <class Scheme>
using weight_formula = formula_tag<*schemes::weight_formula_of(Scheme::id)>;

/// w quantized by formula tag Formula (the fast kernel: bit-identical to the reference); a rotating
/// formula rotates `transform_size`-column blocks (0: its row's size).
template <class Formula>
quantized_matrix quantize_matrix(const input_view& w, unsigned threads, std::int64_t transform_size = 0) {
  const auto& f = schemes::formula_of(Formula::id);
  quantized_matrix m;
  m.rows = w.rows;
  m.cols = w.cols;
  m.codes.resize(static_cast<std::size_t>(schemes::code_bytes(f, w.rows, w.cols)));
  if (f.scales != schemes::scale_format::f32) m.block_scales.resize(static_cast<std::size_t>(schemes::scale_count(f, w.rows, w.cols)));
  if (f.second == schemes::second_scale::codebook)
    m.codebook.resize(static_cast<std::size_t>(schemes::scale_count(f, w.rows, w.cols) * schemes::lut_codebook_size));
  m.row_scales.resize(static_cast<std::size_t>(w.rows));
  void* scales = f.scales == schemes::scale_format::f32 ? static_cast<void*>(m.row_scales.data()) : m.block_scales.data();
  quantize_options q;
  q.transform_size = transform_size;
  block_quantizer<Formula>::run(w, {m.codes.data(), scales, &m.tensor_scale, m.codebook.empty() ? nullptr : m.codebook.data()}, q,
                                {threads});
  return m;
}

/// The weight operands of w, decoded up to their outer scale, as float32 [rows, cols].
template <schemes::formula F>
std::vector<float> decode_weights(const quantized_matrix& w, unsigned threads);

/// Activations after a layer's treatment: the GEMM operands [rows, k] and the per-row outer scale
/// (NVFP4's token scale; empty when there is none).
struct treated_activations {
  scratch_vector<float> values;
  std::vector<float> row_scale;
};
treated_activations treat_activations(schemes::activation_treatment t, const float* x, std::int64_t rows, std::int64_t k,
                                      unsigned threads, std::int64_t hadamard_size = 0);

/// out[rows, w.rows] = the weight-only GEMM of treated activations a and weights w (formula F), outer
/// scales and bias applied: at decode batches the weight rows decoded step by step inside the GEMM,
/// else in float32 panels.
template <schemes::formula F>
void weight_only_matmul(const treated_activations& a, std::int64_t rows, const quantized_matrix& w, const float* bias, float* out,
                        const forward_options& o);

/// The weight-only GEMM of a layer: activation treatment, weight decode, sum, outer scales, bias.
template <class Scheme>
void weight_only_layer_matmul(schemes::activation_treatment t, const float* x, std::int64_t rows, const quantized_matrix& w, const float* bias, float* out,
                              const forward_options& o, std::int64_t hadamard_size = 0) {
  if (rows == 0) return;
  const auto a = treat_activations(t, x, rows, w.cols, o.path == kernel_path::vectorized ? o.threads : 1, hadamard_size);
  weight_only_matmul<weight_formula<Scheme>::id>(a, rows, w, bias, out, o);
}

/// Throws std::invalid_argument with vLLM's message when a MoE size is not a multiple the scheme takes
/// (a tiled weight formula: when w13 [2I, H] or w2 [H, I] is not whole tiles).
void check_weight_only_moe_sizes(const schemes::scheme_contract& c, std::int64_t hidden, std::int64_t inter);
/// The rotation size of a rotating linear layer: `requested`, or 32 (the shorthand's) when 0; throws
/// std::invalid_argument with vLLM's messages for a size that is not a power of two or does not divide K.
std::int64_t checked_hadamard_size(std::int64_t requested, std::int64_t k);
/// Throws std::invalid_argument with vLLM's message when a linear layer's K is not a multiple of the block.
void check_weight_only_linear_k(const schemes::formula_row& f, std::int64_t k);

}  // namespace detail


namespace detail {
/// Whether Act is a treatment tag a weight-only layer of Scheme and kind Kind takes.
template <class Scheme, class Act, layer_kind Kind>
inline constexpr bool takes_treatment_tag = false;
template <class Scheme, schemes::activation_treatment T, layer_kind Kind>
inline constexpr bool takes_treatment_tag<Scheme, treatment_tag<T>, Kind> = schemes::takes_treatment(Scheme::id, Kind, T);
}  // namespace detail

/// What every weight-only layer type checks about its scheme and activation tag, as sentences.
template <class Scheme, class Act, layer_kind Kind>
struct weight_only_rules {
  static_assert(is_weight_only<Scheme>, "weight-only layers take a scheme whose row runs the weight-only GEMM (mxfp8, mxfp4, int8, nvfp4)");
  static_assert(!is_weight_only<Scheme> || Kind == layer_kind::moe || schemes::contract_of(Scheme::id).linear,
                "this scheme quantizes MoE experts only: its linear layers stay unquantized (low-precision-numerics.md §5.1, §6.1)");
  static_assert(!is_weight_only<Scheme> || detail::takes_treatment_tag<Scheme, Act, Kind>,
                "a weight-only layer's activation is its scheme row's treatment for the layer kind (linear_activation, "
                "moe_activation), or a rotation of a linear layer whose method rotates its input");
};

/// A linear layer of the weight-only GEMM: its weight [out_features, in_features], quantized by the
/// scheme's weight formula (linear_layer<Scheme, Act> names it for those schemes).
template <class Scheme, class Act = linear_activation<Scheme>>
struct weight_only_linear_layer : weight_only_rules<Scheme, Act, layer_kind::linear> {
  using scheme = Scheme;
  using activation = Act;
  std::int64_t out_features = 0, in_features = 0;
  std::int64_t hadamard_size = 0;  // the input rotation's block (rotating treatments), else 0
  quantized_matrix weight;
  std::vector<float> bias;  // [out] or empty
};

/// A MoE layer of the weight-only GEMM, its experts quantized by the scheme's weight formula: per
/// expert, w13 [2Ip, Hp] (gate rows at [0, I), up rows at [Ip, Ip + I)) and w2 [Hp, Ip]; Ip, Hp are I,
/// H unless the scheme pads (MXFP4: 32).
template <class Scheme, class Act = moe_activation<Scheme>>
struct weight_only_moe_layer : weight_only_rules<Scheme, Act, layer_kind::moe> {
  using scheme = Scheme;
  using activation = Act;
  std::int64_t experts = 0, hidden = 0, intermediate = 0, hidden_padded = 0, intermediate_padded = 0;
  std::vector<quantized_matrix> w13, w2;
};

/// Quantizes a linear weight ([out, in], bf16/fp16/fp32) with Scheme's weight formula; throws
/// std::invalid_argument with vLLM's message when K is not a multiple of the block.
template <class Scheme, class Act = linear_activation<Scheme>>
  requires is_weight_only<Scheme>
weight_only_linear_layer<Scheme, Act> quantize_linear(const input_view& w, const float* bias, const forward_options& options = {}) {
  weight_only_linear_layer<Scheme, Act> l;
  using formula = detail::weight_formula<Scheme>;
  l.out_features = w.rows;
  l.in_features = w.cols;
  if constexpr (schemes::rotates(Act::id)) {
    // The weights rotated once, then quantized: W H per block, so (x H)(W H)^T = x W^T (new-schemes §A.3).
    l.hadamard_size = detail::checked_hadamard_size(options.hadamard_size, w.cols);
    detail::check_weight_only_linear_k(schemes::formula_of(formula::id), w.cols);
    l.weight = detail::quantize_matrix<formula_tag<*schemes::rotated_weight_formula(formula::id)>>(w, options.threads, l.hadamard_size);
  } else {
    detail::check_weight_only_linear_k(schemes::formula_of(formula::id), w.cols);
    l.weight = detail::quantize_matrix<formula>(w, options.threads);
  }
  if (bias) l.bias.assign(bias, bias + w.rows);
  return l;
}

/// out[M, out_features] (bf16 bits) = x[M, in_features] W^T + bias, the weight-only GEMM of Scheme.
template <class Scheme, class Act>
void linear_forward(const weight_only_linear_layer<Scheme, Act>& layer, const input_view& x, std::uint16_t* out, const forward_options& options = {}) {
  if (x.cols != layer.in_features)
    throw std::invalid_argument("linear_forward: the input has " + std::to_string(x.cols) + " features per row, the layer takes " +
                                std::to_string(layer.in_features));
  const auto xf = detail::widen_all(x);
  detail::scratch_vector<float> y(static_cast<std::size_t>(x.rows * layer.out_features));
  detail::weight_only_layer_matmul<Scheme>(Act::id, xf.data(), x.rows, layer.weight,
                                           layer.bias.empty() ? nullptr : layer.bias.data(), y.data(), options, layer.hadamard_size);
  detail::store_bf16(y, out);
}

/// Quantizes experts (w13 viewed as [E * 2I, H], w2 as [E * H, I]) with Scheme's weight formula, each
/// expert matrix on its own (NVFP4: w13's gate and up rows share one global scale, §6.2), zero-padded
/// first where the scheme pads; throws std::invalid_argument with vLLM's message for sizes it refuses.
template <class Scheme, class Act = moe_activation<Scheme>>
  requires is_weight_only<Scheme>
weight_only_moe_layer<Scheme, Act> quantize_moe(const input_view& w13, const input_view& w2, std::int64_t experts,
                                  const forward_options& options = {}) {
  constexpr auto& c = schemes::contract_of(Scheme::id);
  const auto s = detail::check_moe_shape(w13, w2, experts);
  detail::check_weight_only_moe_sizes(c, s.hidden, s.inter);
  weight_only_moe_layer<Scheme, Act> m;
  m.experts = experts;
  m.hidden = s.hidden;
  m.intermediate = s.inter;
  const std::int64_t pad = c.moe_pads ? c.moe_multiple : 1;
  const std::int64_t hp = (s.hidden + pad - 1) / pad * pad, ip = (s.inter + pad - 1) / pad * pad;
  m.hidden_padded = hp;
  m.intermediate_padded = ip;
  std::vector<float> pad13, pad2;
  if (pad > 1) {
    pad13.resize(static_cast<std::size_t>(2 * ip * hp));
    pad2.resize(static_cast<std::size_t>(hp * ip));
  }
  using formula = detail::weight_formula<Scheme>;
  for (std::int64_t e = 0; e < experts; ++e) {
    input_view x13 = w13.rows_from(e * 2 * s.inter, 2 * s.inter), x2 = w2.rows_from(e * s.hidden, s.hidden);
    if (pad > 1) {  // §4.1: zero padding, gate rows at 0 and up rows at Ip
      reference::moe_pad_expert(w13, w2, e, s.inter, s.hidden, pad13.data(), pad2.data(), pad);
      x13 = {pad13.data(), element::f32, 2 * ip, hp};
      x2 = {pad2.data(), element::f32, hp, ip};
    }
    m.w13.push_back(detail::quantize_matrix<formula>(x13, options.threads));
    m.w2.push_back(detail::quantize_matrix<formula>(x2, options.threads));
  }
  return m;
}

/// out[T, H] (bf16 bits): for each token, the sum over its experts (in top-k order) of weight *
/// w2(silu(gate) * up), each projection the weight-only GEMM of Scheme after its MoE activation
/// treatment. Throws std::invalid_argument for an expert id out of range.
template <class Scheme, class Act>
void moe_forward(const weight_only_moe_layer<Scheme, Act>& layer, const input_view& x, const routing& route, std::uint16_t* out,
                 const forward_options& options = {}) {
  const std::int64_t hp = layer.hidden_padded, ip = layer.intermediate_padded;
  constexpr auto treatment = Act::id;
  detail::scratch_vector<float> sum(static_cast<std::size_t>(x.rows * layer.hidden));
  detail::run_moe(layer.experts, layer.hidden, layer.intermediate, hp, ip, x, route, true, options.threads,
                  [&](std::int64_t e, int which, const float* in, std::int64_t rows, float* o, unsigned threads) {
                    forward_options inner = options;
                    inner.threads = threads;
                    const auto& w = which == 13 ? layer.w13[static_cast<std::size_t>(e)] : layer.w2[static_cast<std::size_t>(e)];
                    detail::weight_only_layer_matmul<Scheme>(treatment, in, rows, w, nullptr, o, inner);
                  },
                  sum.data());
  detail::store_bf16(sum, out);
}

/// The one linear and one MoE layer type of a scheme, as its row's GEMM says: the scaled FP8 layers or
/// the weight-only ones; Act is the layer's activation key or treatment (the row's by default).
/// quantize_linear / quantize_moe return them, linear_forward / moe_forward run them.
template <class Scheme, class Act = linear_activation<Scheme>>
using linear_layer = std::conditional_t<is_weight_only<Scheme>, weight_only_linear_layer<Scheme, Act>, scaled_linear_layer<Scheme, Act>>;
template <class Scheme, class Act = moe_activation<Scheme>>
using moe_layer = std::conditional_t<is_weight_only<Scheme>, weight_only_moe_layer<Scheme, Act>, scaled_moe_layer<Scheme, Act>>;

}  // namespace qpolicy::cpu
