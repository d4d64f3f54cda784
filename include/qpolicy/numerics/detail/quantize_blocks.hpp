#pragma once
// The low-precision quantizers block by block (low-precision-numerics.md §3-§6): one function per
// formula over one block of float32 values already widened from the input, returning the block's
// scale and writing its codes. __host__ __device__: the vectorized CPU path calls them on a widened
// row, the CUDA kernels on a block in registers, so both compute the same bits; the CPU reference
// (kernels/cpu/block_reference.cpp) is written independently from the spec and is the oracle.
#include <cstdint>

#include "qpolicy/numerics/detail/hadamard.hpp"
#include "qpolicy/numerics/detail/lut_b_tile.hpp"
#include "qpolicy/numerics/block_formats.hpp"
#include "qpolicy/numerics/numerics.hpp"
#include "qpolicy/schemes/formulas.hpp"
#include "qpolicy/numerics/tensor_view.hpp"

namespace qpolicy::lp {

using fp8::abs_f32;
using fp8::is_nan;
using fp8::max_nan;
using fp8::max_num;

inline constexpr int mx_block = 32;  // elements per E8M0 scale (MXFP8, MXFP4)
inline constexpr int nv_block = 16;  // elements per e4m3 scale (NVFP4)

/// A formula's quantized_outputs as its block quantizer's kernels address them, each part typed by the
/// formula row's storage; unused parts are null (internal: callers pass quantized_outputs and
/// quantize_options, and the kernels resolve them once with block_outputs_of).
struct block_outputs {
  std::uint8_t* codes = nullptr;         // e4m3 / int8 [rows, cols], or packed e2m1 [rows, cols / 2]
  std::uint8_t* block_scales = nullptr;  // E8M0 or e4m3 bytes [rows, cols / block] (LUT-B: per tile), or the 128x4 layout
  float* row_scales = nullptr;           // INT8's per-row scales, NVFP4's per-token scales: [rows]
  float* tensor_scale = nullptr;         // NVFP4's weight_scale_2: [1]
  bool swizzled = false;                 // block scales in the 128x4 layout (§7; the caller zero-fills it)
  std::uint8_t* codebook = nullptr;      // LUT-B's e4m3 codebooks: [rows / 8, cols / 64, 8]
  std::int64_t transform_size = 0;       // a rotating formula's block, when not its row's (a layer's hadamard_size)
};

/// Where the kernels of formula row `f` write `out`: its scales are block bytes or per-row floats, its
/// second scale per tensor or per token; the scale layout and rotation size from `o`.
inline block_outputs block_outputs_of(const schemes::formula_row& f, const quantized_outputs& out, const quantize_options& o) {
  const bool floats = f.scales == schemes::scale_format::f32;
  return {out.codes, floats ? nullptr : static_cast<std::uint8_t*>(out.scales),
          floats ? static_cast<float*>(out.scales) : f.second == schemes::second_scale::per_token ? out.second : nullptr,
          f.second == schemes::second_scale::per_tensor ? out.second : nullptr, o.swizzled, out.codebook, o.transform_size};
}

/// Where block scale (row, j) of a tensor with `per_row` blocks a row goes.
QPOLICY_HD std::int64_t block_scale_offset(std::int64_t row, std::int64_t j, std::int64_t per_row, bool swizzled) {
  return swizzled ? swizzled_offset(row, j, per_row) : row * per_row + j;
}

/// FlashInfer's inverse scale for byte b (§3.3 step 4): 2^(127 - b), but 0 for b = 0 and b = 254.
QPOLICY_HD float flashinfer_inverse(std::uint8_t b) {
  return b == 0 ? 0.0f : fp8::float_of(static_cast<std::uint32_t>(b < 254 ? 254 - b : 0) << 23);
}

/// NaN-ignoring abs-max (amaxN) of n values.
QPOLICY_HD float amax_ignoring_nan(const float* x, int n) {
  float a = 0.0f;
  for (int i = 0; i < n; ++i) a = max_num(a, abs_f32(x[i]));
  return a;
}

/// Packs the e2m1 codes of x[0..n) times `multiplier` into n / 2 bytes.
QPOLICY_HD void pack_e2m1(const float* x, int n, float multiplier, std::uint8_t* out) {
  for (int i = 0; i < n; i += 2) out[i / 2] = e2m1_pack(e2m1_encode(x[i] * multiplier), e2m1_encode(x[i + 1] * multiplier));
}

/// §3.2: one MXFP8 block, the torch path. b = CEIL(max(amaxT, tiny) / 448), q = tcvt(x / E8(b)); a
/// NaN block gives NaN codes and byte 0.
QPOLICY_HD std::uint8_t mxfp8_torch_block(const float* x, std::uint8_t* q) {
  float a = 0.0f;
  for (int i = 0; i < mx_block; ++i) a = max_nan(a, abs_f32(x[i]));
  a = max_nan(a, fp8::float_of(0x00800000u));
  const std::uint8_t b = e8m0_ceil(a / fp8::max_e4m3);
  const float scale = is_nan(a) ? a : e8m0_value(b);
  for (int i = 0; i < mx_block; ++i) q[i] = fp8::tcvt(x[i] / scale);
  return b;
}

/// §3.3: one MXFP8 block, FlashInfer's path. b = UE8M0-RP(amaxN * R448), q = sat(x * inv(b)).
QPOLICY_HD std::uint8_t mxfp8_flashinfer_block(const float* x, std::uint8_t* q) {
  const std::uint8_t b = e8m0_round_up(amax_ignoring_nan(x, mx_block) * fp8::float_of(fp8::inv_448_bits));
  const float inv = flashinfer_inverse(b);
  for (int i = 0; i < mx_block; ++i) q[i] = fp8::sat(x[i] * inv);
  return b;
}

/// §4.2: one MXFP4 block with the EVEN scale; codes packed into 16 bytes. NaN is ignored in the amax
/// (unspecified by vLLM, §11).
QPOLICY_HD std::uint8_t mxfp4_even_block(const float* x, std::uint8_t* packed) {
  const std::uint8_t b = e8m0_even(amax_ignoring_nan(x, mx_block));
  pack_e2m1(x, mx_block, 1.0f / e8m0_value(b), packed);  // 2^(127 - b), exact; 2^127 for b = 0
  return b;
}

/// §4.3: one MXFP4 block with Blackwell's RCEIL scale (b = UE8M0-RP(amaxN * R6)).
QPOLICY_HD std::uint8_t mxfp4_rceil_block(const float* x, std::uint8_t* packed) {
  const std::uint8_t b = e8m0_round_up(amax_ignoring_nan(x, mx_block) * fp8::float_of(0x3E2AAAABu));
  pack_e2m1(x, mx_block, flashinfer_inverse(b), packed);
  return b;
}

/// §6.2 step 4 and §6.3 step 4: one NVFP4 16-block under encode scale `encode` (the global scale, or
/// a token's E). Returns the e4m3 scale byte; the codes are 0 when the block's scale is 0 (weights,
/// `zero_if_scale_zero`) or its amax is 0 (per-token activations). rcp.approx is modelled as the
/// correctly rounded reciprocal (§11).
QPOLICY_HD std::uint8_t nvfp4_block(const float* x, float encode, bool zero_if_scale_zero, std::uint8_t* packed) {
  const float v = amax_ignoring_nan(x, nv_block);
  const std::uint8_t sf = fp8::sat(encode * (v * fp8::float_of(0x3E2AAAABu)));
  const float scale = fp8::decode(sf);
  const bool zero = zero_if_scale_zero ? scale == 0.0f : v == 0.0f;
  pack_e2m1(x, nv_block, zero ? 0.0f : 1.0f / (scale * (1.0f / encode)), packed);
  return sf;
}

/// §6.2 steps 1-2: NVFP4's global scale from the matrix's amaxT: rcp(max(A, 1e-8)) * 2688.
QPOLICY_HD float nvfp4_global_scale(float amax) { return (1.0f / max_nan(amax, fp8::float_of(0x322BCC77u))) * 2688.0f; }

/// §6.3 step 2: a token's decode scale st = amaxN(row) * (1/2688).
QPOLICY_HD float nvfp4_token_scale(float row_amax) { return row_amax * fp8::float_of(0x39C30C31u); }

/// §5.2 step 2: INT8's row scale s = rD(amaxT / 127) in the model dtype D.
QPOLICY_HD float int8_scale(element d, float amax) { return round_to(d, amax / 127.0f); }

/// §5.2 steps 3-4: one INT8 code, q = clamp(round half even(rD(w / s)), -127, 127), NaN -> 0.
/// Clamping first changes nothing (the bounds are integers) and keeps the rounding trick in range.
QPOLICY_HD std::int8_t int8_code(element d, float w, float s) {
  const float t = round_to(d, w / s);
  if (is_nan(t)) return 0;
  const float c = t > 127.0f ? 127.0f : t < -127.0f ? -127.0f : t;
  // Adding and subtracting 1.5 * 2^23 rounds |c| <= 2^22 to an integer, half to even (the rounding mode).
  const float magic = 12582912.0f;
  return static_cast<std::int8_t>((c + magic) - magic);
}

// ---- the GEMM operands (§9): a weight element as the weight-only kernels multiply it ----

/// The block function of block formula F over one block of widened values `v` (element `first` of the
/// tensor): writes the block's codes and returns its scale byte. `encode` is NVFP4's encode scale (the
/// global scale for weights, the token's for activations). Both backends' block loops call this.
template <schemes::formula Row>
QPOLICY_HD std::uint8_t quantize_block(const float* v, float encode, std::uint8_t* codes, std::int64_t first) {
  using lf = schemes::formula;
  constexpr lf F = schemes::formula_of(Row).base;  // a rotating row quantizes as its base after the rotation
  if constexpr (F == lf::mxfp8_torch) return mxfp8_torch_block(v, codes + first);
  else if constexpr (F == lf::mxfp8_flashinfer) return mxfp8_flashinfer_block(v, codes + first);
  else if constexpr (F == lf::mxfp4_even) return mxfp4_even_block(v, codes + first / 2);
  else if constexpr (F == lf::mxfp4_rceil) return mxfp4_rceil_block(v, codes + first / 2);
  else if constexpr (F == lf::nvfp4_weight) return nvfp4_block(v, encode, true, codes + first / 2);
  else {
    static_assert(F == lf::nvfp4_per_token, "quantize_block takes the formulas with byte block scales");
    return nvfp4_block(v, encode, false, codes + first / 2);
  }
}

/// Weight element (n, k) of an [*, cols] matrix quantized by formula F, dequantized up to its outer
/// scale (INT8's per-row scale and NVFP4's scale_2 multiply the sum instead): exact in float32, and in
/// bf16 within the normal range. MXFP8 follows Marlin, whose scale byte 0 decodes as 0 (§3.5).
/// `codes` and `block_scales` are row-major.
template <schemes::formula F>
QPOLICY_HD float weight_operand(const std::uint8_t* codes, const std::uint8_t* block_scales, std::int64_t cols, std::int64_t n,
                           std::int64_t k, const std::uint8_t* codebooks = nullptr) {
  // The decode follows the formula row's storage: its code format, and its block scales' format (values,
  // not a reference to the row: device code reads no host table).
  using code = schemes::code_format;
  using scale = schemes::scale_format;
  static_assert(schemes::formula_of(F).weight && schemes::formula_of(F).low_precision(), "weight_operand decodes the weight-only GEMM's weights");
  constexpr code codes_as = schemes::formula_of(F).codes;
  constexpr scale scales_as = schemes::formula_of(F).scales;
  constexpr std::int64_t block = schemes::formula_of(F).block();
  const std::int64_t i = n * cols + k;
  if constexpr (codes_as == code::lut3_tiles) {
    // LUT-B (§B.4): tile (n / 8, k / 64), its codebook and its scale.
    const std::int64_t tile = (n / lut_rows) * (cols / lut_cols) + k / lut_cols;
    return lut_value(codes + tile * lut_packed_bytes, codebooks + tile * lut_entries, block_scales[tile],
                     static_cast<int>(n % lut_rows), static_cast<int>(k % lut_cols));
  } else if constexpr (codes_as == code::int8) {
    static_assert(scales_as == scale::f32, "INT8 codes decode up to their float32 row scale");
    return static_cast<float>(static_cast<std::int8_t>(codes[i]));
  } else {
    const std::uint8_t b = block_scales[n * (cols / block) + k / block];
    float v;
    if constexpr (codes_as == code::e4m3) v = fp8::decode(codes[i]);
    else {
      static_assert(codes_as == code::e2m1_packed, "weight_operand has no decode for this code format: add its branch");
      v = e2m1_value(i % 2 ? e2m1_high(codes[i / 2]) : e2m1_low(codes[i / 2]));
    }
    if constexpr (scales_as == scale::e4m3) return v * fp8::decode(b);
    else if constexpr (codes_as == code::e4m3) return b == 0 ? 0.0f : v * e8m0_value(b);  // Marlin's MXFP8
    else return v * e8m0_value(b);
  }
}

}  // namespace qpolicy::lp
