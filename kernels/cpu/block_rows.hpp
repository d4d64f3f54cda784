#pragma once
// Internal to kernels/cpu: the low-precision row kernels block_quantizer.cpp's rows call, the AVX-512 ones
// defined in block_rows_avx512.cpp (QPOLICY_X86_KERNELS builds; callers check has_avx512_kernels() first) and
// the portable NVFP4 blocks they fall back on.
#include <cstddef>
#include <cstdint>

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#include "qpolicy/numerics/detail/lut_b_tile.hpp"

namespace qpolicy::cpu::rows {

/// 1 / E8(b) = 2^(127 - b), exactly, from its bits (2^-127 for b = 254 is the subnormal 0x00400000): x
/// times it is x / E8(b), the same real number rounded once.
inline std::uint32_t e8m0_reciprocal_bits(std::uint32_t b) { return b == 254 ? 0x00400000u : (254 - b) << 23; }

/// The NVFP4 16-blocks of a widened row under encode scale `encode` (§6.2 step 4, §6.3 step 4): codes
/// (two per byte) and e4m3 scale bytes; `zero_if_scale_zero` for weights (§6.2), else a zero amax.
void nvfp4_blocks(const float* x, std::int64_t blocks, float encode, bool zero_if_scale_zero, std::uint8_t* codes, std::uint8_t* scales);

/// The activation treatments' operands from whole blocks of codes, in AVX-512 registers where this CPU
/// has them (treated_values_avx512.cpp; the same bits as treat_activations' loops): NVFP4 per token
/// (16-blocks; ±0 codes give +0), MXFP4 EVEN and MXFP8 (32-blocks; values rounded to bf16,
/// `e4m3_values` the 256 codes' values). Each returns the elements it wrote: the whole blocks of n, or
/// 0 where this CPU has no AVX-512.
std::size_t nvfp4_token_values_vectorized(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n, float* out);
std::size_t mxfp4_bf16_values_vectorized(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n, float* out);
std::size_t mxfp8_bf16_values_vectorized(const std::uint8_t* codes, const std::uint8_t* scales, std::size_t n, const float* e4m3_values,
                                         float* out);

#if QPOLICY_X86_KERNELS
}  // namespace qpolicy::cpu::rows
#include "qpolicy/kernels/cpu/detail/e4m3_avx512.hpp"  // QPOLICY_AVX512_F16C
namespace qpolicy::cpu::rows {

/// The row kernels in AVX-512 registers, from widened floats or (Bf16) bf16 words straight from the
/// input: the same bits as the portable row functions.
/// MXFP4 32-blocks (§4.2 EVEN, or §4.3 RCEIL): packed codes and E8M0 scale bytes.
template <bool Bf16>
QPOLICY_AVX512_F16C void mxfp4_blocks_avx512(const void* x, std::int64_t blocks, bool rceil, std::uint8_t* codes, std::uint8_t* scales);
/// MXFP8 32-blocks (§3.2 torch path, or §3.3 FlashInfer): e4m3 codes and E8M0 scale bytes. `next_row`: the
/// row quantized next (bf16 words), fetched a little at a time meanwhile.
template <bool Bf16>
QPOLICY_AVX512_F16C void mxfp8_blocks_avx512(const void* x, std::int64_t blocks, bool flashinfer, std::uint8_t* codes, std::uint8_t* scales,
                                             const void* next_row = nullptr);
/// NVFP4 16-blocks, as nvfp4_blocks. With `token_scale` (NVFP4 per token), encode is not read: the
/// row's token scale st is written there and the blocks' encode scale is 1 / st. `next_row`: the row
/// quantized next (bf16 words), fetched a little at a time meanwhile.
template <bool Bf16>
QPOLICY_AVX512_F16C void nvfp4_blocks_avx512(const void* x, std::int64_t blocks, float encode, bool zero_if_scale_zero, std::uint8_t* codes,
                         std::uint8_t* scales, float* token_scale = nullptr, const void* next_row = nullptr);
/// The amax bits of bf16 words in segments of `width` (the last may be shorter) of n words, over `rows`
/// rows `stride` words apart: segment j's largest magnitude bits (NaN's among them) folded into acc[j];
/// `nan` set when a word is NaN (amax_avx512.cpp).
QPOLICY_AVX512_F16C void segment_amax_bits_avx512(const std::uint16_t* words, std::int64_t stride, std::int64_t rows, std::int64_t n,
                                                  std::int64_t width, std::uint16_t* acc, bool* nan);
/// The NaN-ignoring amax of n bf16 words; `nan` says whether there was a NaN.
QPOLICY_AVX512_F16C float bf16_amax_avx512(const std::uint16_t* words, std::int64_t n, bool& nan);
/// An INT8 row (§5.2) of bf16 words, the model dtype bf16: its codes, and its scale returned.
QPOLICY_AVX512_F16C float int8_row_bf16_avx512(const std::uint16_t* words, std::int64_t cols, std::int8_t* q);

#endif

}  // namespace qpolicy::cpu::rows
