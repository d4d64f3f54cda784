#include "qpolicy/kernels/cpu/dequantize.hpp"

#include <cstring>

#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/kernels/cpu/low_precision.hpp"
#include "qpolicy/numerics/detail/low_precision_blocks.hpp"
#include "qpolicy/numerics/low_precision.hpp"
#include "qpolicy/numerics/numerics.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy::cpu {

namespace {

using schemes::code_format;
using schemes::scale_format;
using schemes::second_scale;

/// The value of element k of row r's codes.
float code_value(const schemes::formula_row& f, const std::uint8_t* codes, std::int64_t r, std::int64_t k, std::int64_t cols) {
  switch (f.codes) {
    case code_format::e4m3: return fp8::decode(codes[r * cols + k]);
    case code_format::e2m1_packed: {
      const std::uint8_t byte = codes[(r * cols + k) / 2];
      return lp::e2m1_value(k % 2 ? lp::e2m1_high(byte) : lp::e2m1_low(byte));
    }
    case code_format::int8: return static_cast<float>(static_cast<std::int8_t>(codes[r * cols + k]));
    case code_format::lut3_tiles: break;  // decoded by its tiles
  }
  return 0.0f;
}

/// Rows [first, last) of a row-wise formula, each element rounded into `out`.
void decode_rows(const schemes::formula_row& f, const stored_tensors& in, element out_type, void* out, std::int64_t first,
                 std::int64_t last) {
  const std::int64_t cols = in.cols;
  const std::int64_t per_row = schemes::scales_per_row(f, cols);
  // FP8 rows: the float32 scale of the element's group on the key's grid (per tensor, token/channel, 1xG, 128x128).
  const auto grid = schemes::scale_grid(f.group, in.rows, cols);
  const std::int64_t group_rows = f.group == per_channel ? 1 : f.group.row < 0 ? in.rows : f.group.row;
  const std::int64_t group_cols = f.group == per_channel ? cols : f.group.col < 0 ? cols : f.group.col;
  const auto* float_scales = static_cast<const float*>(in.scales);
  const auto* byte_scales = static_cast<const std::uint8_t*>(in.scales);
  for (std::int64_t r = first; r < last; ++r) {
    for (std::int64_t k = 0; k < cols; ++k) {
      const float c = code_value(f, in.codes, r, k, cols);
      float v;
      if (f.scales == scale_format::f32) {
        v = c * float_scales[(r / group_rows) * grid[1] + k / group_cols];
      } else {
        const std::uint8_t b = byte_scales[lp::block_scale_offset(r, k / f.block(), per_row, in.swizzled)];
        const float s = f.scales == scale_format::e8m0 ? lp::e8m0_value(b) : fp8::decode(b);
        if (f.second == second_scale::per_tensor) v = c * (s * in.second[0]);
        else if (f.second == second_scale::per_token) v = c * (s * in.second[r]);
        else v = c * s;
      }
      const std::int64_t at = r * cols + k;
      if (out_type == element::f32) static_cast<float*>(out)[at] = v;
      else if (out_type == element::bf16) static_cast<std::uint16_t*>(out)[at] = fp8::to_bf16(v);
      else static_cast<std::uint16_t*>(out)[at] = lp::to_fp16(v);
    }
  }
}

}  // namespace

void dequantize(schemes::formula id, const stored_tensors& in, element out_type, void* out, const cpu_options& o) {
  const auto& f = schemes::formula_of(id);
  if (f.codes == code_format::lut3_tiles) {
    if (out_type == element::f32) throw std::invalid_argument("LUT-B decodes to bf16 or fp16 (§B.4), not float32");
    lut_b_dequantize(in.codes, in.codebooks, static_cast<const std::uint8_t*>(in.scales), in.rows, in.cols, out_type,
                     static_cast<std::uint16_t*>(out), o);
    return;
  }
  // INT8's row scale holds a model-dtype value (§5): code x scale in float32, then rounded, as the
  // model-dtype product compressed-tensors computes (x_q.to(scale.dtype) * scale) rounds.
  detail::parallel_ranges(in.rows, o.threads, [&](std::int64_t first, std::int64_t last) { decode_rows(f, in, out_type, out, first, last); });
}

}  // namespace qpolicy::cpu
