#include "qpolicy/kernels/cpu/dequantize.hpp"

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>

#include "qpolicy/kernels/cpu/detail/e4m3_encoder.hpp"
#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/kernels/cpu/low_precision.hpp"
#include "qpolicy/numerics/detail/low_precision_blocks.hpp"
#include "qpolicy/numerics/low_precision.hpp"
#include "qpolicy/numerics/numerics.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy::cpu {

namespace {

using schemes::code_format;

/// Each code's value, by table: e4m3fn's 256 (fp8::decode), and e2m1's by byte, both nibbles at once
/// (low nibble first; lp::e2m1_value), one load for two codes.
struct code_tables {
  float e4m3[256];
  float e2m1_pairs[256][2];
  code_tables() {
    for (int i = 0; i < 256; ++i) {
      e4m3[i] = fp8::decode(static_cast<std::uint8_t>(i));
      e2m1_pairs[i][0] = lp::e2m1_value(static_cast<std::uint8_t>(i & 0xF));
      e2m1_pairs[i][1] = lp::e2m1_value(static_cast<std::uint8_t>(i >> 4));
    }
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

#if QPOLICY_X86_KERNELS
#define QPOLICY_DECODE_AVX512 1
// GCC 12's intrinsic headers build some results from an "undefined" register, which
// -Wmaybe-uninitialized reports once inlined here: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// Packed e2m1 codes, 16 at a time (`bytes` holds n / 2 bytes, n a multiple of 16), times s, to bf16:
/// each nibble's value from a 16-float table by permute, the product rounded as fp8::to_bf16 rounds it
/// (nearest even; a NaN keeps its upper bits, quieted).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void e2m1_bf16_avx512(const std::uint8_t* bytes, std::int64_t n, float s,
                                                                            std::uint16_t* out) {
  const __m512 table = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
  const __m512 scale = _mm512_set1_ps(s);
  const __m128i low_nibbles = _mm_set1_epi8(0x0F);
  for (std::int64_t i = 0; i < n; i += 16) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes + i / 2));
    // Element 2j is byte j's low nibble, 2j + 1 its high one.
    const __m128i nibbles = _mm_unpacklo_epi8(_mm_and_si128(b, low_nibbles), _mm_and_si128(_mm_srli_epi16(b, 4), low_nibbles));
    const __m512 v = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(nibbles), table), scale);
    const __m512i u = _mm512_castps_si512(v);
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))), 16);
    const __m512i quieted = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quieted)));
  }
}
#pragma GCC diagnostic pop
#endif

/// One run of `n` codes starting at element `first` (even for packed e2m1, whose runs are whole blocks),
/// times scale s, rounded into out[0..n). The code format and the output type are template arguments,
/// so the loop has no switch and vectorizes.
template <code_format C, element T>
QPOLICY_CPU_CLONES void decode_run(const std::uint8_t* __restrict codes, std::int64_t first, std::int64_t n, float s, const code_tables& t,
                                   void* __restrict out) {
  if constexpr (C == code_format::e2m1_packed) {
    const std::uint8_t* bytes = codes + first / 2;
#ifdef QPOLICY_DECODE_AVX512
    if constexpr (T == element::bf16)
      if (n % 16 == 0 && detail::has_avx512_kernels()) return e2m1_bf16_avx512(bytes, n, s, static_cast<std::uint16_t*>(out));
#endif
    for (std::int64_t i = 0; i < n / 2; ++i) {
      const float* pair = t.e2m1_pairs[bytes[i]];
      store<T>(out, 2 * i, pair[0] * s);
      store<T>(out, 2 * i + 1, pair[1] * s);
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
