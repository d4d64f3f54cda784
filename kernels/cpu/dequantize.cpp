#include "qpolicy/kernels/cpu/dequantize.hpp"

#include <algorithm>
#include <cstring>

#include "dequantize_rows.hpp"
#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/kernels/cpu/block_quantizer.hpp"
#include "qpolicy/numerics/detail/quantize_blocks.hpp"
#include "qpolicy/numerics/block_formats.hpp"
#include "qpolicy/numerics/numerics.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy::cpu {

namespace {

using schemes::code_format;

/// Rows [first, last) of a row-wise formula: each run of elements that share a scale decoded at once,
/// the run's scale from the decode every decoder shares (dq::run_scale).
template <code_format C, element T>
void decode_rows(const schemes::formula_row& f, const stored_tensors& in, void* out, std::int64_t first, std::int64_t last) {
  const auto l = dq::layout_of(f, in.rows, in.cols, in.swizzled);
  const std::int64_t cols = in.cols;
  const std::size_t width = T == element::f32 ? 4 : 2;
  for (std::int64_t r = first; r < last; ++r)
    for (std::int64_t k = 0; k < cols; k += l.run) {
      const float s = dq::run_scale(l, in.scales, in.second, r, k / l.run);
      detail::dequantize_run(C, in.codes, r * cols + k, std::min(l.run, cols - k), s, T,
                             static_cast<std::uint8_t*>(out) + static_cast<std::size_t>(r * cols + k) * width);
    }
}

template <code_format C>
void decode_all(const schemes::formula_row& f, const stored_tensors& in, element out_type, void* out, const cpu_options& o) {
  detail::parallel_ranges(in.rows, o.threads, [&](std::int64_t first, std::int64_t last) {
    if (out_type == element::f32) decode_rows<C, element::f32>(f, in, out, first, last);
    else if (out_type == element::bf16) decode_rows<C, element::bf16>(f, in, out, first, last);
    else decode_rows<C, element::f16>(f, in, out, first, last);
  });
}

}  // namespace

void dequantize(schemes::formula id, const stored_tensors& in, element out_type, void* out, const cpu_options& o) {
  const auto& f = schemes::formula_of(id);
  // One case per code format and no default: a format without a decoder does not compile (-Werror=switch).
  switch (f.codes) {
    case code_format::lut3_tiles:
      if (out_type == element::f32) throw std::invalid_argument("LUT-B decodes to bf16 or fp16 (§B.4), not float32");
      return lut_b_dequantize(in.codes, in.codebooks, static_cast<const std::uint8_t*>(in.scales), in.rows, in.cols, out_type,
                              static_cast<std::uint16_t*>(out), o);
    // INT8's row scale holds a model-dtype value (§5): code x scale in float32, then rounded, as the
    // model-dtype product compressed-tensors computes (x_q.to(scale.dtype) * scale) rounds.
    case code_format::e4m3: return decode_all<code_format::e4m3>(f, in, out_type, out, o);
    case code_format::int8: return decode_all<code_format::int8>(f, in, out_type, out, o);
    case code_format::e2m1_packed: return decode_all<code_format::e2m1_packed>(f, in, out_type, out, o);
  }
}

}  // namespace qpolicy::cpu
