#pragma once
// The decode of one stored element, shared by every decoder (cpu::dequantize's runs, the CUDA decode
// kernel): a formula row's code, scale and second-scale formats as plain values a kernel takes by
// value, the scale of a run of elements, and a code's value. Element (r, k) decodes to
// code_value(r, k) * run_scale(r, k / run) in float32, rounded once to the output type; for NVFP4 the
// run's scale is e4m3 scale x second scale first (vLLM's dequantize_to_dtype order).
#include <cstdint>

#include "qpolicy/numerics/detail/quantize_blocks.hpp"
#include "qpolicy/numerics/block_formats.hpp"
#include "qpolicy/numerics/numerics.hpp"
#include "qpolicy/schemes/contract.hpp"
#include "qpolicy/schemes/formulas.hpp"

namespace qpolicy {

/// The tensors formula `f` stored for an [rows, cols] input, as quantize_tensor_parts writes them: the
/// codes, the first-level scales (float32, or bytes row-major or in the 128x4 layout), the second-level
/// float32 scale(s) (NVFP4's weight_scale_2, one, or its per-token scales, one a row), and LUT-B's
/// codebooks. Host or device pointers, as the decoder that takes them says.
struct stored_tensors {
  const std::uint8_t* codes = nullptr;
  const void* scales = nullptr;
  const float* second = nullptr;
  const std::uint8_t* codebooks = nullptr;
  std::int64_t rows = 0, cols = 0;
  bool swizzled = false;
};

namespace dq {

/// What a formula's decoder reads for an [rows, cols] tensor, from its row of the formula table.
struct decode_layout {
  schemes::code_format codes = schemes::code_format::e4m3;
  schemes::scale_format scales = schemes::scale_format::f32;
  schemes::second_scale second = schemes::second_scale::none;
  std::int64_t cols = 0;
  std::int64_t run = 0;         // elements along K one scale covers
  std::int64_t group_rows = 1;  // float32 scales: rows one scale covers
  std::int64_t grid_cols = 1;   // float32 scales: scales per group of rows
  std::int64_t per_row = 1;     // byte block scales: scales per row
  bool swizzled = false;
};

/// The layout of formula row `f` for an [rows, cols] tensor (block scales row-major or swizzled).
inline decode_layout layout_of(const schemes::formula_row& f, std::int64_t rows, std::int64_t cols, bool swizzled) {
  decode_layout l;
  l.codes = f.codes;
  l.scales = f.scales;
  l.second = f.second;
  l.cols = cols;
  l.swizzled = swizzled;
  if (f.scales == schemes::scale_format::f32) {
    // FP8 rows: the float32 scale of a group on the key's grid (per tensor, token/channel, 1xG, 128x128).
    l.grid_cols = schemes::scale_grid(f.group, rows, cols)[1];
    l.group_rows = f.group == per_channel ? 1 : f.group.row < 0 ? rows : f.group.row;
    l.run = f.group == per_channel || f.group.col < 0 ? cols : f.group.col;
  } else {
    l.per_row = schemes::scales_per_row(f, cols);
    l.run = f.block() ? f.block() : cols;
  }
  return l;
}

/// The scale that multiplies the codes of run j of row r.
QPOLICY_HD float run_scale(const decode_layout& l, const void* scales, const float* second, std::int64_t r, std::int64_t j) {
  if (l.scales == schemes::scale_format::f32) return static_cast<const float*>(scales)[(r / l.group_rows) * l.grid_cols + j];
  const std::uint8_t b = static_cast<const std::uint8_t*>(scales)[lp::block_scale_offset(r, j, l.per_row, l.swizzled)];
  float s = l.scales == schemes::scale_format::e8m0 ? lp::e8m0_value(b) : fp8::decode(b);
  if (l.second == schemes::second_scale::per_tensor) s = s * second[0];
  else if (l.second == schemes::second_scale::per_token) s = s * second[r];
  return s;
}

/// The value of the code of element (r, k), for the code formats of row-wise runs (LUT-B's tiles decode
/// by lut_value instead: NaN here). One case per format and no default (-Werror=switch).
QPOLICY_HD float code_value(const decode_layout& l, const std::uint8_t* codes, std::int64_t r, std::int64_t k) {
  const std::int64_t i = r * l.cols + k;
  switch (l.codes) {
    case schemes::code_format::e2m1_packed: {
      const std::uint8_t byte = codes[i / 2];
      return lp::e2m1_value(static_cast<std::uint8_t>(k % 2 ? byte >> 4 : byte & 0xF));
    }
    case schemes::code_format::int8: return static_cast<float>(static_cast<std::int8_t>(codes[i]));
    case schemes::code_format::e4m3: return fp8::decode(codes[i]);
    case schemes::code_format::lut3_tiles: break;
  }
  return fp8::float_of(0x7FC00000u);
}

/// Element (r, k) decoded to float32.
QPOLICY_HD float element_value(const decode_layout& l, const stored_tensors& in, std::int64_t r, std::int64_t k) {
  return code_value(l, in.codes, r, k) * run_scale(l, in.scales, in.second, r, k / l.run);
}

}  // namespace dq

}  // namespace qpolicy
