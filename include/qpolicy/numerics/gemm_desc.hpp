#pragma once
// What an FP8 GEMM is, independent of the backend: how its activations and weights are scaled (spec
// §10). Shared by the CPU and CUDA GEMMs and the forward passes. No CUDA types.
#include <cstdint>
#include <string_view>

namespace qpolicy::fp8 {

/// How activations are quantized before a GEMM (spec §5, §7).
enum class activation_quant : std::uint8_t { per_tensor, per_token, group_128 };
/// How a weight's scales are laid out (spec §4, §6, §8).
enum class weight_scales : std::uint8_t { per_tensor, per_channel, block_128x128 };

/// How messages name an activation quantizer and a weight-scale layout.
constexpr std::string_view name_of(activation_quant a) {
  constexpr std::string_view names[] = {"per-tensor", "per-token", "1x128 groups"};
  return names[static_cast<int>(a)];
}
constexpr std::string_view name_of(weight_scales w) {
  constexpr std::string_view names[] = {"per-tensor", "per-channel", "128x128 blocks"};
  return names[static_cast<int>(w)];
}

/// The row stride (in scales) of a 128x128 block-scale grid as cuBLASLt reads it: the K-block count
/// rounded up to 4 (16 bytes). Equal to the plain row-major [ceil(N/128), K/128] grid when K/128 % 4 == 0.
constexpr std::int64_t cublaslt_block_scale_stride(std::int64_t k) { return (k / 128 + 3) / 4 * 4; }

}  // namespace qpolicy::fp8
