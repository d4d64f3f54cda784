#pragma once
// The CPU fast path of the low-precision quantizers (behind cpu::quantize<Formula>): one specialization per formula tag,
// rows split over threads, each row widened once into a float buffer and quantized block by block with
// the shared __host__ __device__ block arithmetic (numerics/quantize_blocks.hpp) that the CUDA
// kernels run too. Bit-identical to the CPU reference (tests/numerics/quantize_property_test.cpp).
#include <optional>

#include "qpolicy/numerics/detail/quantize_blocks.hpp"
#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/schemes/formulas.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"

namespace qpolicy::cpu {

/// The quantizer of low-precision formula tag Formula (formulas::mxfp8_torch, ...). x: [rows, cols]
/// with cols a multiple of the formula's block and, for the formulas that compute in the model dtype,
/// bf16 or fp16 (the caller checks both). Writes the outputs schemes::formula_of(Formula::id) has.
/// `q.amax` (with `q.has_amax`): NVFP4 weights' global scale from this amax instead of x's own (a w13
/// quantized a shard or a row range at a time: gate and up share one global scale, spec §6.2).
template <class Formula>
struct block_quantizer {
  static void run(const input_view& x, const quantized_outputs& out, const quantize_options& q = {}, const cpu_options& = {});
};

/// LUT-B tiles decoded (new-schemes-numerics.md §B.4): out[rows, cols] = rD(F8(codebook[index]) *
/// 2^(scale - 127)) as bf16 or fp16 bits (the product is exact in float32; fp16 overflows to inf and
/// underflows to zero where the value is outside its range). packed: [rows / 8, cols / 64, 192];
/// codebooks: [rows / 8, cols / 64, 8] e4m3 bytes; scales: [rows / 8, cols / 64] E8M0 bytes.
void lut_b_dequantize(const std::uint8_t* packed, const std::uint8_t* codebooks, const std::uint8_t* scales, std::int64_t rows,
                      std::int64_t cols, element out_type, std::uint16_t* out, const cpu_options& = {});

/// Each `size`-column block of each row of x rotated by the normalized Hadamard matrix (§A.3), rounded
/// once to x's dtype: out[rows, cols] as x's element type (bf16/fp16 bits, or float32). size: a power of two
/// dividing cols.
void hadamard_rotate(const input_view& x, std::int64_t size, void* out, const cpu_options& = {});

}  // namespace qpolicy::cpu
