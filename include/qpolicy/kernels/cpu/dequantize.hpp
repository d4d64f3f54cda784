#pragma once
// Decoding a formula's stored tensors back to a model dtype on the CPU: what `quantize-tensor
// --dequantize` runs, and the decode a requantization starts from. One function for every row of the
// formula table, driven by the row's code, scale and second-scale formats.
#include <cstdint>

#include "qpolicy/kernels/cpu/vectorized.hpp"
#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/schemes/formulas.hpp"

namespace qpolicy::cpu {

/// The tensors formula `f` stored for an [rows, cols] input, as quantize_tensor_parts writes them: the
/// codes, the first-level scales (float32, or bytes row-major or in the 128x4 layout), the second-level
/// float32 scale(s) (NVFP4's weight_scale_2, one, or its per-token scales, one a row), and LUT-B's
/// codebooks.
struct stored_tensors {
  const std::uint8_t* codes = nullptr;
  const void* scales = nullptr;
  const float* second = nullptr;
  const std::uint8_t* codebooks = nullptr;
  std::int64_t rows = 0, cols = 0;
  bool swizzled = false;
};

/// Decodes formula `f`'s stored tensors into `out` ([rows, cols] of out_type: bf16, fp16 or float32
/// bits). Each element is its code's value times its scales in float32, rounded once to out_type:
/// code x scale for the FP8 rows and INT8 (exact for the E8M0-scaled MX rows), and for NVFP4
/// e2m1 x (e4m3 scale x second scale), the order of vLLM's dequantize_to_dtype (the decode it
/// requantizes from). LUT-B decodes its tiles (§B.4). A rotating formula decodes to the rotated values.
void dequantize(schemes::formula f, const stored_tensors& in, element out_type, void* out, const cpu_options& o = {});

}  // namespace qpolicy::cpu
