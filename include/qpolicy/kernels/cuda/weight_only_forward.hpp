#pragma once
// Forward passes of the low-precision schemes on the GPU, the same steps as
// kernels/cpu/weight_only_forward.hpp: each projection treats its activations as the scheme's layer
// contract says (none; MXFP4 quantize-dequantize; NVFP4 per-token codes with the token scale applied
// to the sum) with the CUDA quantizers, then runs the weight-only GEMM (weight_only_gemm.hpp) over the
// weights quantized once on the CPU (bit-identical on both backends). A MoE layer runs every expert
// of a projection in one launch, around the MoE steps shared with the FP8 passes (detail::moe_pipeline).
//   auto d = cuda::upload(cpu::quantize_moe<qp::mxfp4>(w13, w2, experts));
//   cuda::moe_forward(ctx, d, x, tokens, route, out);
// Plain header: host templates over the kernels' host functions.
#include <cstdint>
#include <vector>

#include "qpolicy/kernels/cuda/device_memory.hpp"
#include "qpolicy/kernels/cuda/forward.hpp"
#include "qpolicy/kernels/cpu/weight_only_forward.hpp"
#include "qpolicy/kernels/cuda/weight_only_gemm.hpp"

namespace qpolicy::cuda {

/// One matrix (or one per expert, side by side) of a low-precision scheme on the device.
struct device_quantized_matrices {
  std::int64_t rows = 0, cols = 0, code_step = 0, scale_step = 0, codebook_step = 0;
  device_memory codes, block_scales, row_scales, tensor_scales, codebooks;
};

/// A linear layer of the weight-only GEMM on the device.
template <class Scheme, class Act>
struct device_weight_only_linear {
  std::int64_t out_features = 0, in_features = 0;
  std::int64_t hadamard_size = 0;  // the input rotation's block (rotating treatments), else 0
  device_quantized_matrices weight;
  device_memory bias;  // bf16 [out], or empty
};

/// A MoE layer of the weight-only GEMM on the device: each projection's experts side by side.
template <class Scheme, class Act>
struct device_weight_only_moe : moe_dims {
  device_quantized_matrices w13, w2;
};

namespace detail {

/// The matrices on the device, expert after expert.
device_quantized_matrices upload_matrices(const std::vector<cpu::quantized_matrix>& matrices);

/// Activations after a treatment, on the device: the bf16 GEMM operands [rows, k] (x itself when there
/// is no treatment, else ctx.treated) and the per-row outer scales (ctx.token_scales), or null.
struct device_treated {
  const std::uint16_t* values;
  const float* row_scale;
};
device_treated treat_activations(forward_context& ctx, schemes::activation_treatment t, const std::uint16_t* x, std::int64_t rows,
                                 std::int64_t k, std::int64_t hadamard_size = 0);

/// The weight-only problem of matrices `m` over treated activations into `out`.
inline lp::weight_only::problem weight_only_problem_of(const device_quantized_matrices& m, const device_treated& a, std::uint16_t* out,
                                                       const std::uint16_t* bias) {
  return {a.values,
          m.codes.as<std::uint8_t>(),
          m.block_scales.get() ? m.block_scales.as<std::uint8_t>() : nullptr,
          m.row_scales.get() ? m.row_scales.as<float>() : nullptr,
          m.tensor_scales.get() ? m.tensor_scales.as<float>() : nullptr,
          a.row_scale,
          m.code_step,
          m.scale_step,
          out,
          m.rows,
          m.cols,
          bias,
          m.codebooks.get() ? m.codebooks.as<std::uint8_t>() : nullptr,
          m.codebook_step};
}

}  // namespace detail

/// The layers on the device.
template <class Scheme, class Act>
device_weight_only_linear<Scheme, Act> upload(const cpu::weight_only_linear_layer<Scheme, Act>& l) {
  device_weight_only_linear<Scheme, Act> d;
  d.out_features = l.out_features;
  d.in_features = l.in_features;
  d.hadamard_size = l.hadamard_size;
  d.weight = detail::upload_matrices({l.weight});
  if (!l.bias.empty()) {
    std::vector<std::uint16_t> b(l.bias.size());
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = fp8::to_bf16(l.bias[i]);
    d.bias = to_device(b.data(), b.size() * sizeof(std::uint16_t));
  }
  return d;
}
template <class Scheme, class Act>
device_weight_only_moe<Scheme, Act> upload(const cpu::weight_only_moe_layer<Scheme, Act>& m) {
  device_weight_only_moe<Scheme, Act> d;
  static_cast<moe_dims&>(d) = {m.experts, m.hidden, m.intermediate, m.hidden_padded, m.intermediate_padded};
  d.w13 = detail::upload_matrices(m.w13);
  d.w2 = detail::upload_matrices(m.w2);
  return d;
}

/// out[rows, out_features] = the layer applied to x[rows, in_features] (both bf16, device).
template <class Scheme, class Act>
void linear_forward(forward_context& ctx, const device_weight_only_linear<Scheme, Act>& layer, const std::uint16_t* x, std::int64_t rows,
                    std::uint16_t* out) {
  if (rows == 0) return;
  const auto a = detail::treat_activations(ctx, Act::id, x, rows, layer.in_features, layer.hadamard_size);
  const std::int64_t offsets[] = {0, rows};
  weight_only_gemm<cpu::detail::weight_formula<Scheme>>(
      detail::weight_only_problem_of(layer.weight, a, out, layer.bias.get() ? layer.bias.template as<std::uint16_t>() : nullptr), offsets, 1,
      ctx.launch);
}

/// out[T, H] (bf16, device) for x[T, H] (bf16, device) routed by `route` (host arrays); every
/// expert of a projection in one launch. Throws std::invalid_argument for an expert id out of range.
template <class Scheme, class Act>
void moe_forward(forward_context& ctx, const device_weight_only_moe<Scheme, Act>& layer, const std::uint16_t* x, std::int64_t tokens,
                 const cpu::routing& route, std::uint16_t* out) {
  constexpr auto treatment = Act::id;
  detail::moe_pipeline(ctx, layer, x, tokens, route, out,
                       [&](const std::uint16_t* in, std::int64_t k, int which, std::int64_t, std::uint16_t* result,
                           const detail::moe_rows& rows) {
                         const auto a = detail::treat_activations(ctx, treatment, in, rows.slots, k);
                         weight_only_gemm_tiles<cpu::detail::weight_formula<Scheme>>(
                             detail::weight_only_problem_of(which == 13 ? layer.w13 : layer.w2, a, result, nullptr), rows.tiles, rows.tile_count,
                             ctx.launch);
                       });
}

/// The one linear and one MoE layer type of a scheme on the device, as its row's GEMM says (what
/// upload returns for cpu::linear_layer and cpu::moe_layer).
template <class Scheme, class Act = cpu::linear_activation<Scheme>>
using device_linear = std::conditional_t<cpu::is_weight_only<Scheme>, device_weight_only_linear<Scheme, Act>, device_scaled_linear<Scheme, Act>>;
template <class Scheme, class Act = cpu::moe_activation<Scheme>>
using device_moe = std::conditional_t<cpu::is_weight_only<Scheme>, device_weight_only_moe<Scheme, Act>, device_scaled_moe<Scheme, Act>>;

}  // namespace qpolicy::cuda
