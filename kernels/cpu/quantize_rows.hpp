#pragma once
// Internal to kernels/cpu: the quantizers' vector passes in portable SIMD (quantize_rows.cpp, compiled
// once per target of the platform; cpu_target.cpp says which one runs). Each lane computes exactly what
// the scalar formulas compute (numerics.hpp, quantize_blocks.hpp); what a lane cannot decide alone
// is the caller's, and each function says what that is.
#include <cstdint>

namespace qpolicy::cpu::detail {

/// out[i] = the float32 value of bf16 (or fp16) word in[i], i < n.
void widen_bf16_words(const std::uint16_t* in, std::int64_t n, float* out);
void widen_f16_words(const std::uint16_t* in, std::int64_t n, float* out);

/// The largest magnitude bits among v[0, n) that are not NaN (0 for none); `nan` set when one is.
std::uint32_t magnitude_bits_f32(const float* v, std::int64_t n, bool* nan);

/// The largest magnitude bits of bf16 words (NaN's among them) in segments of `width` (the last may be
/// shorter) of n words: folded into acc[j] for segment j; `nan` set when a word is NaN.
void magnitude_bits_bf16(const std::uint16_t* words, std::int64_t n, std::int64_t width, std::uint16_t* acc, bool* nan);

/// For each of `blocks` blocks of `block` floats (16 or 32): the largest magnitude bits that are not NaN
/// (the NaN-ignoring amax's bits) into finite_or_inf[j], and the largest of all (above 0x7F800000: the
/// block holds a NaN) into widest[j].
void block_magnitude_bits(const float* x, std::int64_t blocks, std::int64_t block, std::uint32_t* finite_or_inf, std::uint32_t* widest);

/// e4m3 codes of y = in[i] * s[j] (or in[i] / s[j]), j = i / width, saturating to +-448, rounding to
/// nearest even: sat(y), which for every y but NaN is also each rule's code (e4m3_encoder.hpp). Returns
/// whether some y was NaN: then those codes are the caller's to set by its rule. `ahead`: memory the
/// caller reads next, fetched meanwhile (may be null).
bool sat_codes_f32(const float* in, std::int64_t n, std::int64_t width, const float* s, bool multiply, std::uint8_t* out,
                    const void* ahead);
bool sat_codes_bf16(const std::uint16_t* in, std::int64_t n, std::int64_t width, const float* s, bool multiply, std::uint8_t* out,
                     const void* ahead);

/// e2m1 codes of x * multipliers[j] over `blocks` blocks of `block` floats (16 or 32), two per byte
/// (element 2i in the low nibble): lp::e2m1_encode of every product, NaN included. A NaN multiplier is
/// the caller's (which NaN a product keeps depends on operand order).
void e2m1_codes(const float* x, std::int64_t blocks, std::int64_t block, const float* multipliers, std::uint8_t* packed);
/// e2m1_codes of bf16 words, each widened in registers.
void e2m1_codes_bf16(const std::uint16_t* x, std::int64_t blocks, std::int64_t block, const float* multipliers, std::uint8_t* packed);

/// Which MX formula's E8M0 block scales e8m0_block_scales computes.
enum class e8m0_scales : std::uint8_t {
  mxfp8_torch,       // §3.2: CEIL(max(amax, 2^-126) / 448), multiplier 1 / E8(b); a NaN block: byte 0, a NaN multiplier
  mxfp8_flashinfer,  // §3.3: UE8M0-RP(amax * R448), FlashInfer's inverse
  mxfp4_even,        // §4.2: EVEN(amax), multiplier 1 / E8(b)
  mxfp4_rceil,       // §4.3: UE8M0-RP(amax * (1/6)), FlashInfer's inverse
};

/// The E8M0 scale bytes and code multipliers of n blocks from their NaN-ignoring amax bits (and, for the
/// torch path's NaN rule, the largest bits of all, NaN's included: `widest`, else unread).
void e8m0_block_scales(const std::uint32_t* amax, const std::uint32_t* widest, std::int64_t n, e8m0_scales kind, std::uint8_t* scales,
                       float* multipliers);

/// NVFP4's block scales from the blocks' NaN-ignoring amax bits (§6.2-6.3 step 4): scale byte
/// sat(encode * (amax * (1/6))) and the codes' multiplier 1 / (E4M3(byte) * (1 / encode)), 0 where the
/// scale is zero (`zero_if_scale_zero`: weights) or the amax is (activations). False when a product was
/// NaN (an infinite encode scale times a zero amax): then the outputs are the caller's to compute.
bool nvfp4_block_scales(const std::uint32_t* amax, std::int64_t n, float encode, bool zero_if_scale_zero, std::uint8_t* scales,
                        float* multipliers);

/// The model dtype a quantizer rounds to before INT8's integer rounding (lp::round_to).
enum class model_rounding : std::uint8_t { bf16, f16, f32 };

/// INT8 codes q[i] = lp::int8_code(D, row[i], s), i < n.
void int8_codes(const float* row, std::int64_t n, float s, model_rounding rounding, std::int8_t* q);
/// int8_codes of a bf16 row read as words (the model dtype's rounding: bf16's), each vector widened in registers.
void int8_codes_bf16(const std::uint16_t* words, std::int64_t n, float s, std::int8_t* q);

/// The Hadamard rotation of `blocks` consecutive blocks of n columns by the tabulated signed matrix h
/// ([n, n], row-major): out[j] = the fused multiply-add chain over i of x[i] * h[i][j] from 0, in i's
/// order, plus 0 (numerics/detail/hadamard.hpp), per block.
void rotate_blocks(const float* x, std::int64_t blocks, const float* h, std::int64_t n, float* out);

/// v[i] rounded to bf16 (fp8::to_bf16) and widened back, in place, i < n.
void round_to_bf16(float* v, std::int64_t n);

/// How many of n words (16-bit elements with exponent mask `exponent`, or float32) are infinite or NaN.
std::int64_t non_finite_words(const std::uint16_t* v, std::int64_t n, std::uint16_t exponent);
std::int64_t non_finite_floats(const std::uint32_t* v, std::int64_t n);

}  // namespace qpolicy::cpu::detail
