#pragma once
// One formula (a row of schemes::formula_table) applied to one 2-D tensor, on the CPU or the GPU: what
// `qpolicy quantize-tensor` runs per tensor, and the building block of checkpoint conversion. The
// checks of what a formula cannot take come first, from its row, before any work.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <optional>
#include <string_view>
#include <vector>

#include "qpolicy/kernels/cuda/device_memory.hpp"
#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/keys/quant_key.hpp"
#include "qpolicy/schemes/formulas.hpp"

namespace qpolicy {

/// Where kernels run.
enum class device_kind : std::uint8_t { cpu, cuda };

/// Options of quantize_tensor.
struct tensor_quant_options {
  bool ue8m0 = false;                                   // 1x128 groups and 128x128 blocks
  fp8::scale_layout layout = fp8::scale_layout::row_major;  // 1x128 groups
  bool swizzled = false;                                // low-precision block scales in the 128x4 layout
  device_kind device = device_kind::cpu;
  unsigned threads = 0;
  std::string name;  // the tensor or layer, for messages
  /// The amax a per-tensor scale comes from, instead of the tensor's own (a joint unit's amax, or a
  /// whole tensor's when it is quantized a row range at a time): fp8_per_tensor_static on the CPU, and
  /// the NVFP4 weights' global scale on either device.
  std::optional<float> amax;
  /// A rotating formula's Hadamard size when not its row's (a layer's hadamard_size: a power of two
  /// dividing K); 0 for the row's.
  std::int64_t transform_size = 0;
};

/// The formulas quantize-tensor implements, by name, for messages.
std::string quantize_tensor_keys();

/// One tensor a formula stores: its name suffix ("" for the codes, ".scale", ...), element type, shape
/// and bytes.
struct stored_part {
  std::string suffix;
  dtype type = dtype::u8;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};

/// Quantizes `x` with formula `f` on the CPU or the GPU into the tensors the formula stores: the codes
/// (suffix ""), the scales (".scale", in the formula's scale type) and the second-level scale where it
/// has one. Throws config_error, before any work, for a K the formula does not take (with vLLM's
/// message), an fp32 input to a formula that computes in the model dtype, an empty or overflowing
/// shape and an option the formula does not have; cuda::cuda_error for a failed CUDA call.
std::vector<stored_part> quantize_tensor_parts(schemes::formula f, const input_view& x, const tensor_quant_options& options);

/// The tensors formula `f` stores for an [rows, cols] input under `options` (suffix, type, shape; no
/// bytes): what a decoder expects beside the codes. The same refusals as quantize_tensor_parts.
std::vector<stored_part> stored_layout(schemes::formula f, std::int64_t rows, std::int64_t cols, const tensor_quant_options& options);

/// Decodes formula `f`'s stored tensors of an [rows, cols] input back to out ([rows, cols] of out_type:
/// bf16, fp16 or float32 bits) on the CPU or the GPU (options.device; options.swizzled for the 128x4
/// block scales): `parts` are host bytes in stored_layout's order (codes, scales, then the second scale
/// or LUT-B's codebooks), each the size stored_layout gives. Every element is cpu::dequantize's decode.
/// config_error for a part of the wrong size; cuda::cuda_error for a failed CUDA call or a build
/// without CUDA.
void dequantize_parts(schemes::formula f, std::span<const std::span<const std::byte>> parts, std::int64_t rows, std::int64_t cols,
                      element out_type, void* out, const tensor_quant_options& options);

/// quantize_tensor_parts into `parts`, reusing their buffers' memory (a stream of equal chunks
/// allocates once).
void quantize_tensor_parts_into(schemes::formula f, const input_view& x, const tensor_quant_options& options,
                                std::vector<stored_part>& parts);

/// The stored shape of the scales quant key `key`'s formula gives an [rows, cols] tensor (row-major
/// layout): [1] per tensor, [rows, 1] per token or channel, the block or group grid otherwise.
std::vector<std::int64_t> tensor_scale_shape(key_id key, std::int64_t rows, std::int64_t cols);

/// `data` ([rows, cols] of `type`) as a kernel input. safetensors promises no alignment, so data that
/// is not aligned for its element type is copied into `scratch` first: kernels load aligned elements.
input_view aligned_input(std::span<const std::byte> data, element type, std::int64_t rows, std::int64_t cols,
                              std::vector<std::uint32_t>& scratch);

/// One output of a formula in device memory: its name suffix, element type and shape.
struct device_part {
  std::string suffix;
  dtype type = dtype::u8;
  std::vector<std::int64_t> shape;
  cuda::device_memory memory;
};

/// quantize_tensor_parts on the current CUDA device, in place: x's data is device memory and the
/// outputs are new device memory (what a DLPack caller hands over and takes back, with no copy to the
/// host). The same refusals first (config_error); cuda::cuda_error for a failed CUDA call or a build
/// without CUDA. Runs on the default stream and waits for the kernels before returning.
std::vector<device_part> quantize_tensor_parts_on_device(schemes::formula f, const input_view& x,
                                                         const tensor_quant_options& options);

}  // namespace qpolicy
