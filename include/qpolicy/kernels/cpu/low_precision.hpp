#pragma once
// The CPU fast path of the low-precision quantizers (behind cpu::quantize<Formula>): one specialization per formula tag,
// rows split over threads, each row widened once into a float buffer and quantized block by block with
// the shared __host__ __device__ block arithmetic (numerics/low_precision_blocks.hpp) that the CUDA
// kernels run too. Bit-identical to the CPU reference (tests/numerics/quantize_property_test.cpp).
#include <optional>

#include "qpolicy/numerics/detail/low_precision_blocks.hpp"
#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/schemes/formulas.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"

namespace qpolicy::cpu {

/// The quantizer of low-precision formula tag Formula (formulas::mxfp8_torch, ...). x: [rows, cols]
/// with cols a multiple of the formula's block and, for the formulas that compute in the model dtype,
/// bf16 or fp16 (the caller checks both). Writes the outputs schemes::formula_of(Formula::id) has.
/// `tensor_amax`: NVFP4 weights' global scale from this amax instead of x's own (a w13 quantized a
/// shard or a row range at a time: gate and up share one global scale, spec §6.2).
template <class Formula>
struct lp_kernel {
  static void run(const input_view& x, const lp::outputs& out, const cpu_options& = {},
                  std::optional<float> tensor_amax = std::nullopt);
};

}  // namespace qpolicy::cpu
