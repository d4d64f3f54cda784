#pragma once
// The CPU fast path of the low-precision quantizers (issue 13): one specialization per formula tag,
// rows split over threads, each row widened once into a float buffer and quantized block by block with
// the shared __host__ __device__ block arithmetic (numerics/low_precision_blocks.hpp) that the CUDA
// kernels run too. Bit-identical to the CPU reference (tests/numerics/low_precision_fast_test.cpp).
#include "qpolicy/numerics/low_precision_blocks.hpp"
#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/schemes/formulas.hpp"
#include "vectorized.hpp"

namespace qpolicy::cpu {

/// The quantizer of low-precision formula tag Formula (formulas::mxfp8_torch, ...). x: [rows, cols]
/// with cols a multiple of the formula's block and, for the formulas that compute in the model dtype,
/// bf16 or fp16 (the caller checks both). Writes the outputs schemes::formula_of(Formula::id) has.
template <class Formula>
struct lp_kernel {
  static void run(const fp8::input_view& x, const lp::outputs& out, const cpu_options& = {});
};

}  // namespace qpolicy::cpu
