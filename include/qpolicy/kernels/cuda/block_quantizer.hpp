#pragma once
// CUDA kernels of the low-precision quantizers (behind cuda::quantize<Formula>), one specialization per formula tag, over
// the same __host__ __device__ block arithmetic as the CPU fast path (numerics/quantize_blocks.hpp),
// so codes and scales are bit-identical to the CPU reference. Plain header: no CUDA types; without
// nvcc the functions report that CUDA is not built in.
#include <cstdint>
#include <optional>

#include "qpolicy/numerics/detail/decode_element.hpp"
#include "qpolicy/numerics/detail/quantize_blocks.hpp"
#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/schemes/formulas.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"

namespace qpolicy::cuda {

/// The quantizer of formula tag Formula on the device: x and every pointer of `out` are device memory
/// (block scales zero-filled by the caller when `out.swizzled`: the 128x4 padding stays 0).
/// `amax_scratch`: one device uint32 the NVFP4 weight kernel overwrites (the matrix's amax, or
/// `q.amax` when `q.has_amax`: see cpu::block_quantizer).
template <class Formula>
struct block_quantizer {
  static void run(const input_view& x, const quantized_outputs& out, std::uint32_t* amax_scratch, const quantize_options& q = {},
                  const launch_options& = {});
};

/// LUT-B tiles decoded on the device (new-schemes §B.4), as cpu::lut_b_dequantize: every pointer is
/// device memory.
void lut_b_dequantize(const std::uint8_t* packed, const std::uint8_t* codebooks, const std::uint8_t* scales, std::int64_t rows,
                      std::int64_t cols, element out_type, std::uint16_t* out, const launch_options& = {});

/// Formula `f`'s stored tensors decoded on the device, element for element as cpu::dequantize (the same
/// dq::element_value): every pointer of `in` and `out` is device memory; out is [rows, cols] of out_type
/// (bf16, fp16 or float32 bits; LUT-B decodes to bf16 or fp16 only).
void dequantize(schemes::formula f, const stored_tensors& in, element out_type, void* out, const launch_options& = {});

/// The Hadamard rotation on the device (§A.3): each `size`-column block of x's rows, rounded once to x's
/// dtype, into out[rows, cols] (float32 values); x and out are device memory.
void hadamard_rotate(const input_view& x, std::int64_t size, float* out, const launch_options& = {});

}  // namespace qpolicy::cuda
