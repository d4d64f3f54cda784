#pragma once
// Decoding a formula's stored tensors back to a model dtype on the CPU: what `quantize-tensor
// --dequantize` runs, and the decode a requantization starts from. One function for every row of the
// formula table, driven by the row's code, scale and second-scale formats.
#include <cstdint>

#include "qpolicy/kernels/cpu/vectorized.hpp"
#include "qpolicy/numerics/detail/decode_element.hpp"
#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/schemes/formulas.hpp"

namespace qpolicy::cpu {

using qpolicy::stored_tensors;

/// Decodes formula `f`'s stored tensors into `out` ([rows, cols] of out_type: bf16, fp16 or float32
/// bits). Each element is its code's value times its scales in float32, rounded once to out_type:
/// code x scale for the FP8 rows and INT8 (exact for the E8M0-scaled MX rows), and for NVFP4
/// e2m1 x (e4m3 scale x second scale), the order of vLLM's dequantize_to_dtype (the decode it
/// requantizes from). LUT-B decodes its tiles (§B.4). A rotating formula decodes to the rotated values.
void dequantize(schemes::formula f, const stored_tensors& in, element out_type, void* out, const cpu_options& o = {});

}  // namespace qpolicy::cpu
