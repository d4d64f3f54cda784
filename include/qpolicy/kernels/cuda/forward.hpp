#pragma once
// Forward passes on the GPU, the same steps as kernels/cpu/forward.hpp and specialized the same way,
// on the scheme tag and the activation key tag: a linear layer quantizes its activations with Act's
// CUDA quantizer and runs its FP8 GEMM through the gemm_runner (cuBLASLt, or the bit-exact
// fallback); a MoE layer gathers tokens per expert and runs w13, SiLU-and-mul and w2 for all experts
// with one grouped GEMM launch each (grouped_gemm.hpp), or per expert through the gemm_runner (the
// loop, the baseline the grouped kernel is measured against), then sums each token's experts with
// its routing weights. Layers are uploaded from their CPU-quantized form (the codes and scales are
// bit-identical on both backends). Plain header: the per-scheme entry points are host templates
// over the CUDA kernels' host functions.
#include <cstdint>
#include <functional>
#include <string>

#include "qpolicy/kernels/cuda/device_memory.hpp"
#include "qpolicy/kernels/cuda/gemm.hpp"
#include "qpolicy/numerics/detail/grouped_tile.hpp"
#include "qpolicy/kernels/cpu/forward.hpp"

namespace qpolicy::cuda {

/// How a MoE layer runs its expert GEMMs: all experts in one grouped launch, or one GEMM per expert.
enum class moe_kernel : std::uint8_t { grouped, loop };

/// What forward passes reuse between calls: the GEMM runner and scratch buffers.
struct forward_context {
  gemm_runner runner;
  device_memory codes, scales, amax, h13, act, y2, gathered, routing;
  device_memory treated, token_scales;  // low-precision activation treatments: operands and token scales
  device_memory rotated;                // a Hadamard layer's rotated activations (bf16)
  launch_options launch;
  gemm_backend prefer = gemm_backend::cublaslt;  // fallback: the kernel that equals the CPU reference
  /// grouped runs when the device and shapes allow it and `prefer` is cublaslt (the grouped kernel sums
  /// in its own order; the bit-exact fallback runs per expert).
  moe_kernel moe = moe_kernel::grouped;
  std::string moe_loop_reason;  // why the last MoE pass ran the loop (empty when it ran grouped)
};

/// A linear layer of the scaled FP8 GEMM on the device, for Scheme run with activation key Act.
template <class Scheme, class Act>
struct device_scaled_linear : cpu::forward_pairing<Scheme, Act> {
  std::int64_t out_features = 0, in_features = 0, w_scale_stride = 0;
  device_memory codes, scales, bias;  // bias: bf16 [out], or empty
};

/// The sizes of a MoE layer on the device: experts, hidden and intermediate, and their padded sizes.
struct moe_dims {
  std::int64_t experts = 0, hidden = 0, intermediate = 0, hidden_padded = 0, intermediate_padded = 0;
};

/// The experts of a MoE layer on the device (layout as cpu::moe_layer), whatever their scheme.
struct device_experts : moe_dims {
  device_memory w13, w2, s13, s2;
  std::int64_t s13_step = 0, s2_step = 0, s13_stride = 0, s2_stride = 0;  // scales per expert; block row strides
};
/// A MoE layer on the device, for Scheme run with activation key Act.
template <class Scheme, class Act>
struct device_scaled_moe : cpu::forward_pairing<Scheme, Act>, device_experts {};

namespace detail {

/// Quantizes x[rows, k] (bf16, device) into ctx.codes / ctx.scales. 1x128 group scales in `groups`
/// layout (cuBLASLt reads them column-major, the grouped kernel row-major); with segment offsets
/// (device, a MoE layer's experts) a per-tensor quantizer gives each segment its own scale.
using activation_quantizer = std::function<void(forward_context& ctx, const std::uint16_t* x, std::int64_t rows, std::int64_t k,
                                                fp8::scale_layout groups, const std::int64_t* segment_offsets, std::int64_t segments)>;

template <class Act>
void quantize_activation(forward_context& ctx, const std::uint16_t* x, std::int64_t rows, std::int64_t k,
                         fp8::scale_layout groups, const std::int64_t* segment_offsets, std::int64_t segments) {
  const input_view xv{x, element::bf16, rows, k};
  ctx.codes.reserve(static_cast<std::size_t>(rows * k));
  using kernel = activation_kernel<Act>;
  constexpr bool per_tensor = key_of(Act::id).scale.group == qpolicy::per_tensor;  // one scale per segment
  const auto grid = schemes::scale_grid(Act::id, rows, k);
  ctx.scales.reserve(sizeof(float) * static_cast<std::size_t>(per_tensor ? segments : grid[0] * grid[1]));
  auto* q = ctx.codes.as<std::uint8_t>();
  auto* s = ctx.scales.as<float>();
  // What each formula needs besides x: an amax scratch (per tensor, one per segment), group options.
  if constexpr (per_tensor) {
    ctx.amax.reserve(sizeof(std::uint32_t) * static_cast<std::size_t>(segments));
    if (segment_offsets)
      quantize_segments_per_tensor(xv, segment_offsets, segments, q, s, ctx.amax.as<std::uint32_t>(), ctx.launch);
    else
      kernel::run(xv, q, s, ctx.amax.as<std::uint32_t>(), ctx.launch);
  } else if constexpr (requires { kernel::run(xv, fp8::group_options{}, q, s, ctx.launch); }) {
    const auto group = key_of(Act::id).scale.group.col;
    kernel::run(xv, {group, false, groups}, q, s, ctx.launch);
  } else {
    kernel::run(xv, q, s, ctx.launch);
  }
}

/// Uploads codes, scales (128x128 block grids restrided to cuBLASLt's stride; returned) and bias.
std::int64_t upload_linear(const std::vector<std::uint8_t>& codes, const std::vector<float>& scales,
                           const std::vector<float>& bias, bool blocks, std::int64_t out_features, std::int64_t in_features,
                           device_memory& d_codes, device_memory& d_scales, device_memory& d_bias);

/// Uploads a MoE layer's experts (each expert's block grids restrided on their own).
void upload_experts(const std::vector<std::uint8_t>& w13, const std::vector<std::uint8_t>& w2, const std::vector<float>& s13,
                    const std::vector<float>& s2, bool blocks, device_experts& d);

/// The rows of a MoE pass grouped by expert: host `count` (expert e's rows are [count[e], count[e + 1])),
/// the same offsets on the device, the device tile table of the grouped kernels, and the row count.
struct moe_rows {
  const std::vector<std::int64_t>& count;
  const std::int64_t* offsets;
  const fp8::grouped::tile* tiles;
  std::int64_t tile_count, slots;
};
/// One projection of every expert: `in` [slots, k] (bf16, device) times matrix `which` (13 or 2) of
/// each expert's rows into `result` [slots, n] (bf16, device).
using moe_projection = std::function<void(const std::uint16_t* in, std::int64_t k, int which, std::int64_t n, std::uint16_t* result,
                                          const moe_rows& rows)>;
/// The MoE pass around the projections, for every scheme: routing planned on the host, tokens
/// gathered per expert, w13, SiLU-and-mul, w2, and each token's experts summed with its weights.
void moe_pipeline(forward_context& ctx, const moe_dims& m, const std::uint16_t* x, std::int64_t tokens, const cpu::routing& route,
                  std::uint16_t* out, const moe_projection& project);

/// The MoE pass of any scheme: `quantize` is the scheme's activation quantizer, `weights` and
/// `activation` its GEMM scalings.
moe_kernel moe_forward(forward_context& ctx, const device_experts& m, fp8::weight_scales weights,
                       fp8::activation_quant activation, const activation_quantizer& quantize, const std::uint16_t* x,
                       std::int64_t tokens, const cpu::routing& route, std::uint16_t* out);

}  // namespace detail

/// The layer on the device.
template <class Scheme, class Act>
device_scaled_linear<Scheme, Act> upload(const cpu::scaled_linear_layer<Scheme, Act>& l) {
  device_scaled_linear<Scheme, Act> d;
  d.out_features = l.out_features;
  d.in_features = l.in_features;
  d.w_scale_stride = detail::upload_linear(l.codes, l.scales, l.bias, l.blocks, l.out_features, l.in_features, d.codes,
                                           d.scales, d.bias);
  return d;
}
template <class Scheme, class Act>
device_scaled_moe<Scheme, Act> upload(const cpu::scaled_moe_layer<Scheme, Act>& m) {
  device_scaled_moe<Scheme, Act> d;
  d.experts = m.experts;
  d.hidden = m.hidden;
  d.intermediate = m.intermediate;
  d.hidden_padded = m.hidden_padded;
  d.intermediate_padded = m.intermediate_padded;
  d.s13_step = m.s13_step;
  d.s2_step = m.s2_step;
  detail::upload_experts(m.w13, m.w2, m.s13, m.s2, m.blocks, d);
  return d;
}

/// out[rows, out_features] = the layer applied to x[rows, in_features] (both bf16, device). Returns
/// the GEMM backend that ran.
template <class Scheme, class Act>
gemm_backend linear_forward(forward_context& ctx, const device_scaled_linear<Scheme, Act>& layer, const std::uint16_t* x,
                            std::int64_t rows, std::uint16_t* out) {
  cpu::detail::check_implementable(device_scaled_linear<Scheme, Act>::weights, device_scaled_linear<Scheme, Act>::activation,
                                   layer.in_features, "linear_forward");
  if (rows == 0) return ctx.prefer;  // nothing to compute, as on the CPU
  detail::quantize_activation<Act>(ctx, x, rows, layer.in_features, fp8::scale_layout::column_major, nullptr, 1);
  const bool bias = layer.bias.get() != nullptr;
  using layer_t = device_scaled_linear<Scheme, Act>;
  const gemm_problem problem{rows, layer.out_features, layer.in_features, layer_t::activation, layer_t::weights, bias};
  const gemm_operands operands{ctx.codes.as<std::uint8_t>(), ctx.scales.as<float>(), layer.codes.template as<std::uint8_t>(),
                               layer.scales.template as<float>(), layer.w_scale_stride,
                               bias ? layer.bias.template as<std::uint16_t>() : nullptr, out};
  return ctx.runner.run(problem, operands, ctx.launch, ctx.prefer);
}

/// out[T, H] (bf16, device) for x[T, H] (bf16, device) routed by `route` (host arrays). Returns
/// which kernel ran the expert GEMMs. Throws std::invalid_argument for an expert id out of range, as
/// the CPU pass does.
template <class Scheme, class Act>
moe_kernel moe_forward(forward_context& ctx, const device_scaled_moe<Scheme, Act>& layer, const std::uint16_t* x,
                       std::int64_t tokens, const cpu::routing& route, std::uint16_t* out) {
  using layer_t = device_scaled_moe<Scheme, Act>;
  return detail::moe_forward(ctx, layer, layer_t::weights, layer_t::activation, &detail::quantize_activation<Act>, x, tokens,
                             route, out);
}

}  // namespace qpolicy::cuda

// The weight-only layers on the device, and device_linear / device_moe, which name either kind.
#include "qpolicy/kernels/cuda/weight_only_forward.hpp"
