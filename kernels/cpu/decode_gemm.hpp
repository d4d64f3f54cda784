#pragma once
// Internal to kernels/cpu: the decode-batch GEMM, y[m, n] = sum_k x[m, k] w[n, k] for the few rows of a
// decode step (M <= decode_batch_rows). Weight bytes dominate there, so each weight row is decoded 32
// elements at a time inside the loop over K and used by every row of x while it is in registers; no
// decoded matrix or panel is written. The lanes run over K: each output is a 16-lane float32 sum,
// reduced at the end (fp8-numerics §10 and low-precision §9 leave the summation order free).
//   - AVX-512 BF16 (decode_gemm_avx512.cpp): vdpbf16ps multiplies operands that are exact in bf16 --
//     e4m3 and int8 codes, e2m1 codes times their block scale, bf16 activations -- so every product is
//     exact, as in float32. vdpbf16ps reads and writes subnormals as zero, so it runs only where every
//     nonzero product is a normal float: activations and weight values zero or at least 2^-60; a weight
//     block with smaller values takes float32 multiply-adds instead, and activations with smaller
//     values the float32 kernel. (A sum that cancels to below 2^-126 is still flushed to zero.)
//     Where the CPU has AMX, sixteen weight rows' decoded steps form a tile for tdpbf16ps, which takes
//     the same operands under the same rules (decode_tiles_amx.hpp).
//   - Elsewhere (decode_gemm.cpp): the same loop in float32, the weights decoded by each formula's
//     element function, in loops cloned per instruction set.
#include <array>
#include <cstdint>

#include "qpolicy/kernels/cpu/low_precision_forward.hpp"
#include "qpolicy/kernels/cpu/detail/scratch.hpp"

namespace qpolicy::cpu::detail {

/// The most rows of x the decode-batch GEMM takes; more rows amortize a decoded panel (gemm_tiled).
inline constexpr std::int64_t decode_batch_rows = 16;

/// How far ahead of a weight row's bytes the AVX-512 kernels fetch at least (the float32 kernel: this;
/// the code rows: prefetch_ahead in decode_rows_avx512.hpp): several rows interleave streams, which the
/// hardware prefetcher follows late; 16 KiB ahead measured 1.6x (MXFP4) and 1.3x (FP8) the speed of no
/// prefetch at M = 1, and more than 4 KiB or 8 KiB.
inline constexpr std::int64_t row_prefetch_bytes = 16384;

/// Weights [n, k] in float32 (the baseline GEMM's).
struct f32_weights {
  const float* values;
  std::int64_t n, k;
};
/// Weights [n, k] as e4m3 codes (the scaled FP8 GEMMs'; their scales multiply outside).
struct e4m3_weights {
  const std::uint8_t* codes;
  std::int64_t n, k;
};
/// Applies X to each low-precision weight formula whose rows the kernels here decode (formula_weights),
/// for their .cpp files' explicit instantiations: the one list of them.
#define QPOLICY_FOR_EACH_DECODED_FORMULA(X)                                                                       \
  X(::qpolicy::schemes::formula::mxfp8_torch)                                                                     \
  X(::qpolicy::schemes::formula::mxfp4_even)                                                                      \
  X(::qpolicy::schemes::formula::int8_per_channel)                                                                \
  X(::qpolicy::schemes::formula::nvfp4_weight)                                                                    \
  X(::qpolicy::schemes::formula::lut_b)

/// Weights quantized by low-precision weight formula F (an lp_matrix), decoded up to their outer scale.
template <schemes::formula F>
struct formula_weights {
  const lp_matrix* matrix;
};

/// The 128 x 128 weight blocks and 1 x 128 activation groups of the block-scaled FP8 GEMM: chunk kb's
/// partial sum of row m and column n is multiplied by a_scale[m, kb] * w_scale[n / 128, kb].
struct group_scales {
  const float* a_scale;
  const float* w_scale;
  std::int64_t chunks;  // K / 128
};

/// The activations of a decode-batch GEMM: [m, k] float32 values, and their bf16 bits when every value is
/// exactly a bf16 that is zero or at least 2^-60 in magnitude (exact_bf16; the vdpbf16ps kernel then runs).
struct batch_activations {
  const float* values;
  const std::uint16_t* bf16;  // null: not all exact (or not asked for)
  std::int64_t m;
};

/// Fills bf16 with the bf16 bits of x[0, count) and returns true when each value is exactly a bf16 that
/// is zero or of magnitude at least 2^-60 (or a NaN or an infinity).
bool exact_bf16(const float* x, std::int64_t count, std::uint16_t* bf16);
/// The same, element by element (decode_gemm.cpp), and in AVX-512 registers (decode_gemm_avx512.cpp;
/// only where has_bf16_dot_kernels()).
bool exact_bf16_scalar(const float* x, std::int64_t count, std::uint16_t* bf16);
bool exact_bf16_avx512(const float* x, std::int64_t count, std::uint16_t* bf16);

/// The columns and depth of a panel of the blocked GEMM (gemm_tiled.cpp): 32 weight rows by 128 elements.
inline constexpr std::int64_t panel_cols = 32, panel_depth = 128;

/// Weight rows [n0, n0 + 32) (zero past the matrix's rows), elements [k0, k0 + depth) (depth <= 128),
/// as float32 in panel[t * 32 + j]: the blocked GEMM's operand. Defined in decode_gemm.cpp.
template <class Weights>
void decode_panel(const Weights& w, std::int64_t n0, std::int64_t k0, std::int64_t depth, float* panel);

/// decode_panel from the bf16 words of decode_gemm_bf16's row decoders (or their float32 pairs),
/// transposed in AVX-512 registers (has_bf16_dot_kernels()). Defined in decode_panel_avx512.cpp.
template <schemes::formula F>
void decode_panel_values(const formula_weights<F>& w, std::int64_t n0, std::int64_t k0, std::int64_t depth, float* panel);

/// out[m, n] = sum_k a[m, k] w[n, k] on the blocked GEMM (float32 panels decoded once per 32 columns,
/// 128 deep, for up to 512 rows), for the weight-only GEMM above the decode batch. Defined in
/// gemm_tiled.cpp.
template <class Weights>
void gemm_panels(const Weights& w, const float* a, std::int64_t m, float* out, unsigned threads);

/// The 256 decoded e4m3fn values, by code.
const std::array<float, 256>& e4m3_values();

/// Whether the vdpbf16ps kernels run: the CPU has AVX-512 BF16 and QPOLICY_CPU_ENCODER is not `portable`.
bool has_bf16_dot_kernels();

/// Whether the AMX tiles run (on top of has_bf16_dot_kernels()): the CPU has AMX-BF16, the kernel
/// grants this process the tile state, and QPOLICY_CPU_ENCODER is not `no-amx`. Defined in decode_gemm_avx512.cpp.
bool has_amx_kernels();

/// The fewest rows of x for which the decode-batch GEMM takes AMX tiles where it can: below, vdpbf16ps
/// is as fast (the tile's products cost as much for one row of x as for sixteen).
inline constexpr std::int64_t amx_min_rows = 2;

/// y[m, n] (row stride ldy) = sum_k x[m, k] w[n, k], times the group scales when given: the vdpbf16ps
/// kernel (x.bf16 set, has_bf16_dot_kernels()), with AMX tiles for sixteen weight rows at a time where
/// has_amx_kernels(). Defined in decode_gemm_avx512.cpp.
template <class Weights>
void decode_gemm_bf16(const Weights& w, const batch_activations& x, const group_scales* groups, float* y, unsigned threads);
/// The same sums in float32 multiply-adds (any CPU, any activations). Defined in decode_gemm.cpp.
template <class Weights>
void decode_gemm_f32(const Weights& w, const batch_activations& x, const group_scales* groups, float* y, unsigned threads);

/// The float32 baseline at decode batches on AVX-512 (fused multiply-adds, the weights prefetched):
/// y[m, n] = sum_k x[m, k] w[n, k]. Defined in decode_gemm_f32_avx512.cpp; only where has_bf16_dot_kernels().
void decode_gemm_f32_avx512(const f32_weights& w, const float* x, std::int64_t m, float* y, unsigned threads);

/// Whether decode_gemm_bf16 decodes these weights into bf16 words (all but float32 weights).
template <class Weights>
inline constexpr bool has_bf16_words = true;
template <>
inline constexpr bool has_bf16_words<f32_weights> = false;

/// The fastest of the two for these operands: the vdpbf16ps kernel when it can run, else float32.
template <class Weights>
void decode_gemm(const Weights& w, const batch_activations& x, const group_scales* groups, float* y, unsigned threads) {
  if constexpr (has_bf16_words<Weights>)
    if (x.bf16 && has_bf16_dot_kernels()) return decode_gemm_bf16(w, x, groups, y, threads);
  decode_gemm_f32(w, x, groups, y, threads);
}

}  // namespace qpolicy::cpu::detail
