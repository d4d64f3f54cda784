#pragma once
// One quant key's formula applied to one 2-D tensor, on the CPU or the GPU: what
// `qpolicy quantize-tensor` runs per tensor, and the building block of checkpoint conversion.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/keys/quant_key.hpp"

namespace qpolicy {

/// Where kernels run.
enum class device_kind : std::uint8_t { cpu, cuda };

/// Options of quantize_tensor.
struct tensor_quant_options {
  bool ue8m0 = false;                                   // 1x128 groups and 128x128 blocks
  fp8::scale_layout layout = fp8::scale_layout::row_major;  // 1x128 groups
  device_kind device = device_kind::cpu;
  unsigned threads = 0;
  std::string name;  // the tensor or layer, for messages
};

/// Codes and scales of one tensor; `scale_shape` is the stored shape of `scales`.
struct quantized_tensor {
  std::vector<std::uint8_t> codes;
  std::vector<float> scales;
  std::vector<std::int64_t> scale_shape;
};

/// The quant keys quantize_tensor implements, by name, for messages.
std::string quantize_tensor_keys();

/// The stored shape of the scales quant key `key`'s formula gives an [rows, cols] tensor (row-major
/// layout): [1] per tensor, [rows, 1] per token or channel, the block or group grid otherwise.
std::vector<std::int64_t> tensor_scale_shape(key_id key, std::int64_t rows, std::int64_t cols);

/// `data` ([rows, cols] of `type`) as a kernel input. safetensors promises no alignment, so data that
/// is not aligned for its element type is copied into `scratch` first: kernels load aligned elements.
fp8::input_view aligned_input(std::span<const std::byte> data, fp8::element type, std::int64_t rows, std::int64_t cols,
                              std::vector<std::uint32_t>& scratch);

/// Quantizes `x` with the formula of `key` (a weight for static keys, an activation for dynamic ones).
/// Throws config_error for a key without a kernel, a shape the formula cannot take or an empty or
/// overflowing shape, and
/// cuda::cuda_error for a failed CUDA call.
quantized_tensor quantize_tensor(key_id key, const fp8::input_view& x, const tensor_quant_options& options);

}  // namespace qpolicy
