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
//   - Elsewhere (decode_gemm.cpp, portable SIMD on every target): the same loop in float32, each weight
//     run decoded by its code format's vector decoder (decode_rows-inl.h); a lone row of x multiplies
//     the codes as they are decoded in registers (lone_row-inl.h), e2m1 and e4m3 codes by their cheapest
//     decodes (bf16 bytes looked up, float16 patterns converted), the row rearranged or scaled once to
//     suit them. NVFP4's e4m3 block scales then multiply each block's sum, not each product.
#include <array>
#include <cstdint>
#include <type_traits>

#include "qpolicy/kernels/cpu/weight_only_forward.hpp"
#include "qpolicy/kernels/cpu/detail/scratch.hpp"
#include "qpolicy/kernels/cpu/detail/isa.hpp"
#include "qpolicy/schemes/registry.hpp"

namespace qpolicy::cpu::detail {

/// The most rows of x the decode-batch GEMM takes; more rows amortize a decoded panel (gemm_tiled).
inline constexpr std::int64_t decode_batch_rows = 16;

/// How far ahead of a weight row's bytes the decode-batch kernels fetch (the AVX-512 code rows: at least
/// this, prefetch_ahead in decode_rows_avx512.hpp): several rows interleave streams, which the hardware
/// prefetcher follows late; 16 KiB ahead measured 1.6x (MXFP4) and 1.3x (FP8) the speed of no prefetch at
/// M = 1 with AVX-512, and more than 4 KiB or 8 KiB; the portable kernels' lone rows on AVX2 as much as
/// 8 KiB or more (MXFP4 1.3x 512 bytes, the float32 baseline 1.1-1.2x 4 KiB and 8 KiB).
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
/// Weights quantized by low-precision weight formula F (an quantized_matrix), decoded up to their outer scale.
template <schemes::formula F>
struct formula_weights {
  const quantized_matrix* matrix;
};

/// How a weight row is stored, as the portable decoders read it: a code format and its block scales.
enum class row_format : std::uint8_t {
  f32,        // float32 values
  e4m3,       // e4m3 codes, their scales outside (the FP8 GEMMs)
  e4m3_e8m0,  // e4m3 codes, an E8M0 scale per 32 (MXFP8; byte 0 decodes as 0, as Marlin does)
  e2m1_e8m0,  // packed e2m1 codes, an E8M0 scale per 32 (MXFP4)
  e2m1_e4m3,  // packed e2m1 codes, an e4m3 scale per 16 (NVFP4; weight_scale_2 outside)
  int8,       // int8 codes, their row scale outside
  lut3,       // LUT-B's 8x64 tiles of 3-bit indices, a codebook and an E8M0 scale per tile
};

/// A weight matrix [n, k] as the portable decoders read it.
struct code_rows {
  row_format format;
  const void* codes;
  const std::uint8_t* scales;  // block scales, row-major (LUT-B: per tile)
  const std::uint8_t* books;   // LUT-B's codebooks
  std::int64_t n, k;
};

/// The elements the portable decoders decode at a time along K: a whole number of every block.
inline constexpr std::int64_t decode_chunk = 128;

/// The row format of weight formula F's stored tensors: from its row's code and scale formats. A
/// formula whose formats have no decoder here is a compile error.
template <schemes::formula F>
consteval row_format row_format_of() {
  using code = schemes::code_format;
  using scale = schemes::scale_format;
  constexpr auto& row = schemes::formula_of(F);
  switch (row.codes) {
    case code::e4m3: return row.scales == scale::e8m0 ? row_format::e4m3_e8m0 : row_format::e4m3;
    case code::e2m1_packed: return row.scales == scale::e8m0 ? row_format::e2m1_e8m0 : row_format::e2m1_e4m3;
    case code::int8: return row_format::int8;
    case code::lut3_tiles: return row_format::lut3;
  }
}

inline code_rows code_rows_of(const f32_weights& w) { return {row_format::f32, w.values, nullptr, nullptr, w.n, w.k}; }
inline code_rows code_rows_of(const e4m3_weights& w) { return {row_format::e4m3, w.codes, nullptr, nullptr, w.n, w.k}; }
template <schemes::formula F>
code_rows code_rows_of(const formula_weights<F>& w) {
  const quantized_matrix& m = *w.matrix;
  return {row_format_of<F>(), m.codes.data(), m.block_scales.empty() ? nullptr : m.block_scales.data(),
          m.codebook.empty() ? nullptr : m.codebook.data(), m.rows, m.cols};
}

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
/// as float32 in panel[t * 32 + j]: the blocked GEMM's operand (portable SIMD; decode_gemm.cpp).
void decode_panel_rows(const code_rows& w, std::int64_t n0, std::int64_t k0, std::int64_t depth, float* panel);

/// The blocked GEMM's multiply of `rows` rows of A (a_stride apart) by one decoded panel (depth <= 128):
/// acc[r][j] += a[r][t] * panel[t][j] for t in [0, depth), each product rounded, then added, in K order
/// (the reference's operations per output). With `chunk_scale` (the block-scaled GEMM: depth is one
/// 128-wide chunk), the chunk's sums start at zero and are added as (sum * chunk_scale[r]) * w_scale.
/// Portable SIMD (decode_gemm.cpp).
void panel_accumulate(const float* a, std::int64_t a_stride, std::int64_t rows, const float* panel, std::int64_t depth, float* acc,
                      const float* chunk_scale, float w_scale);

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

/// Whether the vdpbf16ps kernels run: the active CPU target covers avx3_zen4 (AVX-512 BF16 and VBMI).
inline bool has_bf16_dot_kernels() { return QPOLICY_X86_KERNELS && cpu_target_covers(cpu_target::avx3_zen4); }

/// Whether the AMX tiles run (on top of has_bf16_dot_kernels()): the active CPU target covers avx3_spr
/// (AMX-BF16, the tile state granted by the kernel).
inline bool has_amx_kernels() { return QPOLICY_X86_KERNELS && cpu_target_covers(cpu_target::avx3_spr); }

/// The fewest rows of x for which the decode-batch GEMM takes AMX tiles where it can: below, vdpbf16ps
/// is as fast (the tile's products cost as much for one row of x as for sixteen).
inline constexpr std::int64_t amx_min_rows = 2;

/// y[m, n] (row stride ldy) = sum_k x[m, k] w[n, k], times the group scales when given: the vdpbf16ps
/// kernel (x.bf16 set, has_bf16_dot_kernels()), with AMX tiles for sixteen weight rows at a time where
/// has_amx_kernels(). Defined in decode_gemm_avx512.cpp.
template <class Weights>
void decode_gemm_bf16(const Weights& w, const batch_activations& x, const group_scales* groups, float* y, unsigned threads);
/// The same sums in float32 multiply-adds (any CPU, any activations; portable SIMD, decode_gemm.cpp).
void decode_gemm_rows(const code_rows& w, const batch_activations& x, const group_scales* groups, float* y, unsigned threads);

/// The float32 baseline at decode batches on AVX-512 (fused multiply-adds, the weights prefetched):
/// y[m, n] = sum_k x[m, k] w[n, k]. Defined in decode_gemm_f32_avx512.cpp; only where has_bf16_dot_kernels().
void decode_gemm_f32_avx512(const f32_weights& w, const float* x, std::int64_t m, float* y, unsigned threads);

/// An external table of entry(tag) for each weight formula the weight-only GEMM decodes (the registry's
/// weight_only_formula_types, the one list of them): each kernel whose address an entry takes is emitted
/// in the calling file.
template <class Entry>
const void* decoded_formula_table(Entry entry) {
  using any_function = void (*)();  // the kernels' types differ by formula
  static const auto table = registry::table_of(registry::weight_only_formula_types,
                                               [&](auto tag) { return reinterpret_cast<any_function>(entry(tag)); });
  return &table;
}

/// Whether decode_gemm_bf16 decodes these weights into bf16 words (all but float32 weights).
template <class Weights>
inline constexpr bool has_bf16_words = true;
template <>
inline constexpr bool has_bf16_words<f32_weights> = false;

/// decode_panel_rows by the fastest decoder for these weights (the AVX-512 BF16 one where it runs).
template <class Weights>
void decode_panel(const Weights& w, std::int64_t n0, std::int64_t k0, std::int64_t depth, float* panel) {
  if constexpr (QPOLICY_X86_KERNELS && has_bf16_words<Weights> && !std::is_same_v<Weights, e4m3_weights>)
    if (has_bf16_dot_kernels()) return decode_panel_values(w, n0, k0, depth, panel);
  decode_panel_rows(code_rows_of(w), n0, k0, depth, panel);
}

/// The fastest of the two for these operands: the vdpbf16ps kernel when it can run, else float32.
template <class Weights>
void decode_gemm(const Weights& w, const batch_activations& x, const group_scales* groups, float* y, unsigned threads) {
  if constexpr (QPOLICY_X86_KERNELS && has_bf16_words<Weights>)
    if (x.bf16 && has_bf16_dot_kernels()) return decode_gemm_bf16(w, x, groups, y, threads);
  decode_gemm_rows(code_rows_of(w), x, groups, y, threads);
}

}  // namespace qpolicy::cpu::detail
