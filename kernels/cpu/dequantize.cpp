#include "qpolicy/kernels/cpu/dequantize.hpp"

#include <algorithm>
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

/// Each code's value, by table: e4m3fn's 256 (fp8::decode) and e2m1's 16 (lp::e2m1_value).
struct code_tables {
  float e4m3[256];
  float e2m1[16];
  code_tables() {
    for (int i = 0; i < 256; ++i) e4m3[i] = fp8::decode(static_cast<std::uint8_t>(i));
    for (int i = 0; i < 16; ++i) e2m1[i] = lp::e2m1_value(static_cast<std::uint8_t>(i));
  }
};
const code_tables& tables() {
  static const code_tables t;
  return t;
}

template <element T>
inline void store(void* __restrict out, std::int64_t i, float v) {
  if constexpr (T == element::f32) static_cast<float*>(out)[i] = v;
  else if constexpr (T == element::bf16) static_cast<std::uint16_t*>(out)[i] = fp8::to_bf16(v);
  else static_cast<std::uint16_t*>(out)[i] = lp::to_fp16(v);
}

/// One run of `n` codes starting at element `first` (even for packed e2m1, whose runs are whole blocks),
/// times scale s, rounded into out[0..n). The code format and the output type are template arguments,
/// so the loop has no switch and vectorizes.
template <code_format C, element T>
QPOLICY_CPU_CLONES void decode_run(const std::uint8_t* __restrict codes, std::int64_t first, std::int64_t n, float s, const code_tables& t,
                                   void* __restrict out) {
  if constexpr (C == code_format::e2m1_packed) {
    const std::uint8_t* bytes = codes + first / 2;
    for (std::int64_t i = 0; i < n / 2; ++i) {
      store<T>(out, 2 * i, t.e2m1[bytes[i] & 0xF] * s);
      store<T>(out, 2 * i + 1, t.e2m1[bytes[i] >> 4] * s);
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint8_t b = codes[first + i];
      const float c = C == code_format::e4m3 ? t.e4m3[b] : static_cast<float>(static_cast<std::int8_t>(b));
      store<T>(out, i, c * s);
    }
  }
}

/// Rows [first, last) of a row-wise formula: each run of elements that share a scale decoded at once,
/// the run's scale from the decode every decoder shares (dq::run_scale).
template <code_format C, element T>
void decode_rows(const schemes::formula_row& f, const stored_tensors& in, void* out, std::int64_t first, std::int64_t last) {
  const auto l = dq::layout_of(f, in.rows, in.cols, in.swizzled);
  const std::int64_t cols = in.cols;
  const std::size_t width = T == element::f32 ? 4 : 2;
  const auto& t = tables();
  for (std::int64_t r = first; r < last; ++r)
    for (std::int64_t k = 0; k < cols; k += l.run) {
      const float s = dq::run_scale(l, in.scales, in.second, r, k / l.run);
      decode_run<C, T>(in.codes, r * cols + k, std::min(l.run, cols - k), s, t, static_cast<std::uint8_t*>(out) + static_cast<std::size_t>(r * cols + k) * width);
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
  if (f.codes == code_format::lut3_tiles) {
    if (out_type == element::f32) throw std::invalid_argument("LUT-B decodes to bf16 or fp16 (§B.4), not float32");
    lut_b_dequantize(in.codes, in.codebooks, static_cast<const std::uint8_t*>(in.scales), in.rows, in.cols, out_type,
                     static_cast<std::uint16_t*>(out), o);
    return;
  }
  // INT8's row scale holds a model-dtype value (§5): code x scale in float32, then rounded, as the
  // model-dtype product compressed-tensors computes (x_q.to(scale.dtype) * scale) rounds.
  if (f.codes == code_format::e4m3) decode_all<code_format::e4m3>(f, in, out_type, out, o);
  else if (f.codes == code_format::int8) decode_all<code_format::int8>(f, in, out_type, out, o);
  else decode_all<code_format::e2m1_packed>(f, in, out_type, out, o);
}

}  // namespace qpolicy::cpu
