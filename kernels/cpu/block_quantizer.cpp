#include "qpolicy/kernels/cpu/block_quantizer.hpp"

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <array>
#include <optional>
#include <utility>
#include <vector>

#include "qpolicy/kernels/cpu/detail/e2m1_avx512.hpp"
#include "qpolicy/kernels/cpu/detail/e4m3_avx512.hpp"
#include "qpolicy/kernels/cpu/detail/e4m3_encoder.hpp"
#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/kernels/cpu/detail/rotation.hpp"
#include "qpolicy/kernels/cpu/detail/row_ops.hpp"
#include "qpolicy/kernels/cpu/detail/scratch.hpp"
#include "block_rows.hpp"
#include "lut_b_fit.hpp"
#include "quantize_rows.hpp"
#include "qpolicy/schemes/registry.hpp"

namespace qpolicy::cpu {

using schemes::formula;

using rows::nvfp4_blocks;
#if QPOLICY_X86_KERNELS
using rows::int8_row_bf16_avx512;
using rows::mxfp4_blocks_avx512;
using rows::mxfp8_blocks_avx512;
using rows::nvfp4_blocks_avx512;
#endif

namespace {

/// The chunk of blocks whose scales are made before their codes: independent scale computations the
/// CPU overlaps, and the block amaxes and multipliers stay in L1.
constexpr std::int64_t block_chunk = 64;

/// The MXFP4 blocks of a widened row (§4.2 EVEN, or §4.3 RCEIL): the block functions of
/// numerics/detail/quantize_blocks.hpp over whole blocks, the amax and the codes in vector lanes.
void mxfp4_blocks(const float* x, std::int64_t blocks, bool rceil, std::uint8_t* codes, std::uint8_t* scales) {
  std::uint32_t amax[block_chunk], widest[block_chunk];
  float multipliers[block_chunk];
  for (std::int64_t j0 = 0; j0 < blocks; j0 += block_chunk) {
    const std::int64_t n = std::min(blocks - j0, block_chunk);
    detail::block_magnitude_bits(x + j0 * 32, n, 32, amax, widest);
    detail::e8m0_block_scales(amax, widest, n, rceil ? detail::e8m0_scales::mxfp4_rceil : detail::e8m0_scales::mxfp4_even, scales + j0,
                              multipliers);
    detail::e2m1_codes(x + j0 * 32, n, 32, multipliers, codes + j0 * 16);
  }
}

}  // namespace

namespace rows {

/// The NVFP4 16-blocks of a widened row under encode scale `encode` (§6.2 step 4, §6.3 step 4): the
/// block function (lp::nvfp4_block) restated over whole blocks, the same operations per element (the
/// amax in eight lanes ignores NaN, so its order does not matter), so the code loop vectorizes.
void nvfp4_blocks(const float* x, std::int64_t blocks, float encode, bool zero_if_scale_zero, std::uint8_t* codes, std::uint8_t* scales) {
  std::uint32_t amax[block_chunk], widest[block_chunk];
  float multipliers[block_chunk];
  const float decode = 1.0f / encode;
  for (std::int64_t j0 = 0; j0 < blocks; j0 += block_chunk) {
    const std::int64_t n = std::min(blocks - j0, block_chunk);
    detail::block_magnitude_bits(x + j0 * 16, n, 16, amax, widest);
    bool nan_multiplier = false;
    if (!detail::nvfp4_block_scales(amax, n, encode, zero_if_scale_zero, scales + j0, multipliers))
      for (std::int64_t j = 0; j < n; ++j) {
        const float a = fp8::float_of(amax[j]);  // NaN-ignoring
        const std::uint8_t sf = fp8::sat(encode * (a * fp8::float_of(0x3E2AAAABu)));
        const float scale = fp8::decode(sf);
        const bool zero = zero_if_scale_zero ? scale == 0.0f : a == 0.0f;
        multipliers[j] = zero ? 0.0f : 1.0f / (scale * decode);
        scales[j0 + j] = sf;
      }
    for (std::int64_t j = 0; j < n; ++j) nan_multiplier |= multipliers[j] != multipliers[j];
    detail::e2m1_codes(x + j0 * 16, n, 16, multipliers, codes + j0 * 8);
    for (std::int64_t j = 0; j < n && nan_multiplier; ++j) {
      if (multipliers[j] == multipliers[j]) continue;
      // A NaN multiplier (an infinite token scale): every product is NaN, and which one depends on the
      // operand order, which a vector multiply may swap. The block function's x * m keeps x's NaN where
      // x is one, else m's: said here explicitly.
      const float* v = x + (j0 + j) * 16;
      std::uint8_t* q = codes + (j0 + j) * 8;
      for (int i = 0; i < 8; ++i)
        q[i] = static_cast<std::uint8_t>(lp::e2m1_encode(v[2 * i] != v[2 * i] ? v[2 * i] : multipliers[j]) |
                                         lp::e2m1_encode(v[2 * i + 1] != v[2 * i + 1] ? v[2 * i + 1] : multipliers[j]) << 4);
    }
  }
}

}  // namespace rows

namespace {

/// The scales of MXFP8's (torch path, §3.2) 32-blocks of a widened row: the byte, and the multiplier
/// 1 / E8(b) of the codes (the codes' x / E8(b) as a product: E8(b) is a power of two). A NaN block's
/// multiplier is a (positive) NaN, whatever the NaN's payload, so its codes are NaN and its byte 0.
void mxfp8_torch_scales(const float* x, std::int64_t blocks, std::uint8_t* scales, float* multipliers) {
  std::uint32_t amax[block_chunk], widest[block_chunk];
  for (std::int64_t j0 = 0; j0 < blocks; j0 += block_chunk) {
    const std::int64_t n = std::min(blocks - j0, block_chunk);
    detail::block_magnitude_bits(x + j0 * 32, n, 32, amax, widest);
    detail::e8m0_block_scales(amax, widest, n, detail::e8m0_scales::mxfp8_torch, scales + j0, multipliers + j0);
  }
}

/// The scales of MXFP8's FlashInfer-path (§3.3) 32-blocks of a widened row: the byte
/// UE8M0-RP(amaxN * R448) and the multiplier inv(b) of the codes. Returns how many blocks hold a NaN or
/// an infinity, listed in `special`: their codes come from the block function.
std::int64_t mxfp8_flashinfer_scales(const float* x, std::int64_t blocks, std::uint8_t* scales, float* multipliers, std::int64_t* special) {
  std::uint32_t amax[block_chunk], widest[block_chunk];
  std::int64_t specials = 0;
  for (std::int64_t j0 = 0; j0 < blocks; j0 += block_chunk) {
    const std::int64_t n = std::min(blocks - j0, block_chunk);
    detail::block_magnitude_bits(x + j0 * 32, n, 32, amax, widest);
    detail::e8m0_block_scales(amax, widest, n, detail::e8m0_scales::mxfp8_flashinfer, scales + j0, multipliers + j0);
    for (std::int64_t j = 0; j < n; ++j)
      if (widest[j] >= 0x7F800000u) special[specials++] = j0 + j;
  }
  return specials;
}

/// The MXFP8 (FlashInfer path) blocks of a widened row: the scales, the codes sat(x * inv(b)) through
/// the encoder (its clampS-then-sat rule is sat for every finite product), then the blocks holding a NaN
/// or an infinity again through the block function.
void mxfp8_flashinfer_row(const float* x, std::int64_t blocks, std::uint8_t* codes, std::uint8_t* scales, std::vector<float>& multipliers,
                          std::vector<std::int64_t>& special) {
  multipliers.resize(static_cast<std::size_t>(blocks));
  special.resize(static_cast<std::size_t>(blocks));
  const std::int64_t specials = mxfp8_flashinfer_scales(x, blocks, scales, multipliers.data(), special.data());
  detail::encode_e4m3_f32(x, blocks * 32, 32, multipliers.data(), {detail::e4m3_rule::clamp_s_sat, true}, codes);
  for (std::int64_t i = 0; i < specials; ++i) {
    const std::int64_t j = special[static_cast<std::size_t>(i)];
    lp::mxfp8_flashinfer_block(x + j * 32, codes + j * 32);
  }
}

/// The E8M0 scale rule of an MX formula; none for the others.
constexpr std::optional<detail::e8m0_scales> mx_scales_of(formula f) {
  switch (f) {
    case formula::mxfp8_torch: return detail::e8m0_scales::mxfp8_torch;
    case formula::mxfp8_flashinfer: return detail::e8m0_scales::mxfp8_flashinfer;
    case formula::mxfp4_even: return detail::e8m0_scales::mxfp4_even;
    case formula::mxfp4_rceil: return detail::e8m0_scales::mxfp4_rceil;
    default: return std::nullopt;
  }
}

/// The float32 magnitude bits of each `block`-word block of a bf16 row, from the words (a finite bf16
/// value's float32 bits are its word's, shifted: the widened row's amax), into `amax`, and the largest
/// of them. nullopt for a row holding a NaN or an infinity, whose blocks the widened row's block
/// functions take.
std::optional<std::uint32_t> bf16_block_amax(const std::uint16_t* words, std::int64_t cols, std::int64_t block, std::vector<std::uint32_t>& amax) {
  thread_local std::vector<std::uint16_t> magnitude;
  magnitude.assign(static_cast<std::size_t>(cols / block), 0);
  bool nan = false;
  detail::magnitude_bits_bf16(words, cols, block, magnitude.data(), &nan);
  const std::uint16_t widest = *std::max_element(magnitude.begin(), magnitude.end());
  if (nan || widest >= 0x7F80) return std::nullopt;
  amax.resize(magnitude.size());
  for (std::size_t j = 0; j < magnitude.size(); ++j) amax[j] = std::uint32_t{magnitude[j]} << 16;
  return std::uint32_t{widest} << 16;
}

/// The MX blocks of a bf16 row read as words, with no widened row: the blocks' amax from the words, the
/// E8M0 scales of `kind`, and the codes from the words, each vector widened in registers: the widened
/// row's bits. False, with nothing written, for a row holding a NaN or an infinity.
bool mx_bf16_row(const std::uint16_t* words, std::int64_t cols, detail::e8m0_scales kind, std::uint8_t* codes, std::uint8_t* scales) {
  const std::int64_t blocks = cols / 32;
  thread_local std::vector<std::uint32_t> amax;
  thread_local std::vector<float> multipliers;
  if (!bf16_block_amax(words, cols, 32, amax)) return false;
  multipliers.resize(amax.size());
  detail::e8m0_block_scales(amax.data(), amax.data(), blocks, kind, scales, multipliers.data());
  switch (kind) {
    case detail::e8m0_scales::mxfp8_torch:
    case detail::e8m0_scales::mxfp8_flashinfer:
      detail::encode_e4m3_bf16(words, cols, 32, multipliers.data(),
                               {kind == detail::e8m0_scales::mxfp8_flashinfer ? detail::e4m3_rule::clamp_s_sat : detail::e4m3_rule::tcvt, true},
                               codes);
      return true;
    case detail::e8m0_scales::mxfp4_even:
    case detail::e8m0_scales::mxfp4_rceil: detail::e2m1_codes_bf16(words, blocks, 32, multipliers.data(), codes); return true;
  }
  return false;
}

/// The NVFP4 16-blocks of a bf16 row read as words, with no widened row (as mx_bf16_row): weights under
/// the tensor's encode scale, or activations under their token's, written to `token_scale`. False for a
/// row holding a NaN or an infinity, or whose products make a NaN multiplier (a zero row's infinite encode
/// scale): the widened row's path then writes every output again.
bool nvfp4_bf16_row(const std::uint16_t* words, std::int64_t cols, bool weight, float encode, std::uint8_t* codes, std::uint8_t* scales,
                    float* token_scale) {
  const std::int64_t blocks = cols / 16;
  thread_local std::vector<std::uint32_t> amax;
  thread_local std::vector<float> multipliers;
  const auto widest = bf16_block_amax(words, cols, 16, amax);
  if (!widest) return false;
  multipliers.resize(amax.size());
  const float st = weight ? 0.0f : lp::nvfp4_token_scale(fp8::float_of(*widest));
  if (!weight) encode = 1.0f / st;  // a zero row gives +inf
  if (!detail::nvfp4_block_scales(amax.data(), blocks, encode, weight, scales, multipliers.data())) return false;
  for (const float m : multipliers)
    if (m != m) return false;
  detail::e2m1_codes_bf16(words, blocks, 16, multipliers.data(), codes);
  if (!weight) *token_scale = st;
  return true;
}

/// An INT8 row of bf16 read as words, with no widened row: the row's amax from the words, its scale, and
/// the codes, each vector widened in registers. False for a row holding a NaN (the widened row's scale
/// keeps that NaN).
bool int8_bf16_row(const std::uint16_t* words, std::int64_t cols, std::int8_t* codes, float* scale) {
  std::uint16_t magnitude = 0;
  bool nan = false;
  detail::magnitude_bits_bf16(words, cols, cols, &magnitude, &nan);
  if (nan) return false;
  const float s = lp::int8_scale(element::bf16, fp8::float_of(std::uint32_t{magnitude} << 16));
  detail::int8_codes_bf16(words, cols, s, codes);
  *scale = s;
  return true;
}

/// The MXFP8 (torch path) blocks of a widened row: the scales, then the codes tcvt(x / E8(b)), as
/// x times 1 / E8(b), through the encoder.
void mxfp8_torch_row(const float* x, std::int64_t blocks, std::uint8_t* codes, std::uint8_t* scales, std::vector<float>& multipliers) {
  multipliers.resize(static_cast<std::size_t>(blocks));
  mxfp8_torch_scales(x, blocks, scales, multipliers.data());
  detail::encode_e4m3_f32(x, blocks * 32, 32, multipliers.data(), {detail::e4m3_rule::tcvt, true}, codes);
}

/// The MXFP4 blocks of a row on the widest kernel this CPU runs.
void mxfp4_row(const float* x, std::int64_t blocks, bool rceil, std::uint8_t* codes, std::uint8_t* scales) {
#if QPOLICY_X86_KERNELS
  if (detail::has_avx512_kernels()) return mxfp4_blocks_avx512<false>(x, blocks, rceil, codes, scales);
#endif
  mxfp4_blocks(x, blocks, rceil, codes, scales);
}

/// One row of formula F: `row` holds its widened values, r its index.
template <formula F>
void quantize_row(const float* row, std::int64_t r, std::int64_t cols, element type, float encode, const lp::block_outputs& out) {
  constexpr auto& f = schemes::formula_of(F);
  constexpr formula base = f.base;
  if constexpr (base == formula::mxfp4_even || base == formula::mxfp4_rceil) {
    const std::int64_t blocks = cols / 32;
    if (!out.swizzled) {
      mxfp4_row(row, blocks, base == formula::mxfp4_rceil, out.codes + r * cols / 2, out.block_scales + r * blocks);
    } else {
      std::vector<std::uint8_t> scales(static_cast<std::size_t>(blocks));
      mxfp4_row(row, blocks, base == formula::mxfp4_rceil, out.codes + r * cols / 2, scales.data());
      for (std::int64_t j = 0; j < blocks; ++j) out.block_scales[lp::block_scale_offset(r, j, blocks, true)] = scales[static_cast<std::size_t>(j)];
    }
  } else if constexpr (F == formula::int8_per_channel) {
    const float s = lp::int8_scale(type, detail::amax_range(row, cols, true));
    auto* q = reinterpret_cast<std::int8_t*>(out.codes) + r * cols;
    detail::int8_codes(row, cols, s,
                       type == element::bf16 ? detail::model_rounding::bf16 : type == element::f16 ? detail::model_rounding::f16 : detail::model_rounding::f32,
                       q);
    out.row_scales[r] = s;
  } else {
    const std::int64_t blocks = cols / f.block();
    if constexpr (F == formula::nvfp4_per_token) {
      const float st = lp::nvfp4_token_scale(detail::amax_range(row, cols, false));
      encode = 1.0f / st;  // a zero row gives +inf
      out.row_scales[r] = st;
    }
    constexpr bool nvfp4 = base == formula::nvfp4_weight || base == formula::nvfp4_per_token;
    constexpr bool mxfp8 = base == formula::mxfp8_torch || base == formula::mxfp8_flashinfer;
    static_assert(nvfp4 || mxfp8, "quantize_row has no row kernel for this formula: add its branch");
    // The row kernels write row-major scale bytes: straight into the output, or through a row's buffer
    // into the 128x4 layout.
    thread_local std::vector<std::uint8_t> row_scales;
    thread_local std::vector<float> block_scales;
    thread_local std::vector<std::int64_t> special;
    if (out.swizzled) row_scales.resize(static_cast<std::size_t>(blocks));
    std::uint8_t* scales = out.swizzled ? row_scales.data() : out.block_scales + r * blocks;
    if constexpr (nvfp4) {
#if QPOLICY_X86_KERNELS
      if (detail::has_avx512_kernels()) nvfp4_blocks_avx512<false>(row, blocks, encode, base == formula::nvfp4_weight, out.codes + r * cols / 2, scales);
      else
#endif
        nvfp4_blocks(row, blocks, encode, base == formula::nvfp4_weight, out.codes + r * cols / 2, scales);
    }
#if QPOLICY_X86_KERNELS
    else if (detail::has_avx512_kernels()) mxfp8_blocks_avx512<false>(row, blocks, base == formula::mxfp8_flashinfer, out.codes + r * cols, scales);
#endif
    else if constexpr (base == formula::mxfp8_torch) mxfp8_torch_row(row, blocks, out.codes + r * cols, scales, block_scales);
    else mxfp8_flashinfer_row(row, blocks, out.codes + r * cols, scales, block_scales, special);
    if (out.swizzled)
      for (std::int64_t j = 0; j < blocks; ++j) out.block_scales[lp::block_scale_offset(r, j, blocks, true)] = scales[j];
  }
}

/// The 8x64 tiles of rows [8 * first, 8 * last) of x (LUT-B, §B.3): as many consecutive tiles at once as
/// the vectors have float32 lanes (across tile rows: experts' K is often a few tiles), one per lane.
void lut_b_tiles(const input_view& x, std::int64_t first, std::int64_t last, const lp::block_outputs& out) {
  const std::int64_t k_tiles = x.cols / lp::lut_cols;
  const int lanes = detail::lut_b_fit_lanes();
  lp::lut_scratch scratch;
  detail::scratch_vector<float> lanes_scratch(detail::lut_fit_scratch_floats), staged(static_cast<std::size_t>(lanes) * lp::lut_elements);
  for (std::int64_t at = first * k_tiles; at < last * k_tiles; at += lanes) {
    const int count = static_cast<int>(std::min<std::int64_t>(lanes, last * k_tiles - at));
    for (int l = 0; l < count; ++l) {
      const std::int64_t t = (at + l) / k_tiles, j = (at + l) % k_tiles;
      for (int r = 0; r < lp::lut_rows; ++r)
        detail::widen(x, (t * lp::lut_rows + r) * x.cols + j * lp::lut_cols, lp::lut_cols, staged.data() + l * lp::lut_elements + r * lp::lut_cols);
    }
    detail::lut_b_fit_tiles(staged.data(), count, lanes_scratch.data(), scratch, out.codes + at * lp::lut_packed_bytes,
                            out.codebook + at * lp::lut_entries, out.block_scales + at);
  }
}

/// The row-wise formulas: each row widened, rotated first where the row has a transform, then quantized.
template <formula F>
void run_rows(const input_view& x, const lp::block_outputs& out, const cpu_options& o, float encode) {
  constexpr auto& f = schemes::formula_of(F);
  const std::int64_t size = out.transform_size ? out.transform_size : f.transform_size;
  const detail::hadamard_table rotation(f.transform == schemes::pre_transform::hadamard ? size : 0);
  detail::parallel_ranges(x.rows, o.threads, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> row(static_cast<std::size_t>(x.cols)), rotated(rotation.size ? row.size() : 0);
    // NVFP4 weights come after the tensor's amax pass, which read this range (the same split) front to
    // back: back to front, their rows are still in the cache for most of the range.
    constexpr bool backward = F == formula::nvfp4_weight;
    for (std::int64_t i = first; i < last; ++i) {
      const std::int64_t r = backward ? first + last - 1 - i : i;
      if constexpr (f.transform == schemes::pre_transform::hadamard && (f.base == formula::mxfp4_even || f.base == formula::mxfp4_rceil)) {
        // bf16 rows of size 32 straight from the input, in registers where the CPU has AVX-512.
        if (size == 32 && !out.swizzled && x.type == element::bf16 &&
            detail::rotated_mxfp4_bf16_row(static_cast<const std::uint16_t*>(x.data) + r * x.cols, x.cols, f.base == formula::mxfp4_rceil,
                                           out.codes + r * x.cols / 2, out.block_scales + r * (x.cols / 32)))
          continue;
      }
      // A bf16 row read as words in place (no widened row), by the AVX-512 kernels where the CPU has them.
      [[maybe_unused]] const bool words_in_place = x.type == element::bf16 && reinterpret_cast<std::uintptr_t>(x.data) % 2 == 0;
      [[maybe_unused]] const auto* words = static_cast<const std::uint16_t*>(x.data) + r * x.cols;
#if QPOLICY_X86_KERNELS
      const bool bf16_words = words_in_place && detail::has_avx512_kernels();
      const std::int64_t next = backward ? r - 1 : r + 1;  // the row after this one, for the kernels' prefetch
      const std::uint16_t* next_row = next >= first && next < last ? words + (next - r) * x.cols : nullptr;
      if constexpr (F == formula::int8_per_channel) {
        if (bf16_words) {
          out.row_scales[r] = int8_row_bf16_avx512(words, x.cols, reinterpret_cast<std::int8_t*>(out.codes) + r * x.cols);
          continue;
        }
      }
      if constexpr (F == formula::nvfp4_weight || F == formula::nvfp4_per_token) {
        if (bf16_words && !out.swizzled) {
          nvfp4_blocks_avx512<true>(words, x.cols / 16, encode, F == formula::nvfp4_weight, out.codes + r * x.cols / 2,
                                    out.block_scales + r * (x.cols / 16), F == formula::nvfp4_per_token ? out.row_scales + r : nullptr, next_row);
          continue;
        }
      }
      if constexpr (f.transform == schemes::pre_transform::none &&
                    (f.base == formula::mxfp8_torch || f.base == formula::mxfp8_flashinfer || f.base == formula::mxfp4_even ||
                     f.base == formula::mxfp4_rceil)) {
        // bf16 rows straight from the input, in registers, where the CPU has AVX-512 (no widened row).
        if (bf16_words && !out.swizzled) {
          std::uint8_t* scales = out.block_scales + r * (x.cols / 32);
          if constexpr (f.base == formula::mxfp4_even || f.base == formula::mxfp4_rceil)
            mxfp4_blocks_avx512<true>(words, x.cols / 32, f.base == formula::mxfp4_rceil, out.codes + r * x.cols / 2, scales);
          else
            mxfp8_blocks_avx512<true>(words, x.cols / 32, f.base == formula::mxfp8_flashinfer, out.codes + r * x.cols, scales, next_row);
          continue;
        }
      }
#endif
      if constexpr (F == formula::int8_per_channel) {
        if (words_in_place && int8_bf16_row(words, x.cols, reinterpret_cast<std::int8_t*>(out.codes) + r * x.cols, out.row_scales + r))
          continue;
      }
      if constexpr (F == formula::nvfp4_weight || F == formula::nvfp4_per_token) {
        if (words_in_place && !out.swizzled &&
            nvfp4_bf16_row(words, x.cols, F == formula::nvfp4_weight, encode, out.codes + r * x.cols / 2, out.block_scales + r * (x.cols / 16),
                           F == formula::nvfp4_per_token ? out.row_scales + r : nullptr))
          continue;
      }
      if constexpr (f.transform == schemes::pre_transform::none && mx_scales_of(F)) {
        constexpr bool e2m1 = f.codes == schemes::code_format::e2m1_packed;
        if (words_in_place && !out.swizzled &&
            mx_bf16_row(words, x.cols, *mx_scales_of(F), out.codes + r * x.cols / (e2m1 ? 2 : 1), out.block_scales + r * (x.cols / 32)))
          continue;
      }
      detail::widen(x, r * x.cols, x.cols, row.data());
      if constexpr (f.transform == schemes::pre_transform::hadamard) {
        if (size == 32 && !out.swizzled) {
          // 256 columns at a time: the rotated values stay in L1 between the rotation and the MXFP4 blocks.
          constexpr std::int64_t chunk = 256;
          const std::int64_t blocks = x.cols / 32;
          for (std::int64_t c = 0; c < x.cols; c += chunk) {
            const std::int64_t n = std::min(chunk, x.cols - c);
            detail::rotate_row(row.data() + c, n, rotation, x.type, rotated.data());
            mxfp4_row(rotated.data(), n / 32, f.base == formula::mxfp4_rceil, out.codes + (r * x.cols + c) / 2,
                      out.block_scales + r * blocks + c / 32);
          }
          continue;
        }
        detail::rotate_row(row.data(), x.cols, rotation, x.type, rotated.data());
        quantize_row<F>(rotated.data(), r, x.cols, x.type, encode, out);
      } else {
        quantize_row<F>(row.data(), r, x.cols, x.type, encode, out);
      }
    }
  });
}

}  // namespace

template <class Formula>
void block_quantizer<Formula>::run(const input_view& x, const quantized_outputs& quantized, const quantize_options& q,
                                   const cpu_options& o) {
  constexpr formula F = Formula::id;
  const lp::block_outputs out = lp::block_outputs_of(schemes::formula_of(F), quantized, q);
  float encode = 0.0f;
  if constexpr (F == formula::nvfp4_weight) {
    encode = lp::nvfp4_global_scale(q.has_amax ? q.amax : detail::tensor_amax(x, true, o));  // amaxT of the matrix
    *out.tensor_scale = 1.0f / encode;                                  // weight_scale_2
  }
  if constexpr (F == formula::lut_b) {
    detail::parallel_ranges(x.rows / lp::lut_rows, o.threads, [&](std::int64_t first, std::int64_t last) { lut_b_tiles(x, first, last, out); });
  } else {
    run_rows<F>(x, out, o, encode);
  }
}

void lut_b_dequantize(const std::uint8_t* packed, const std::uint8_t* codebooks, const std::uint8_t* scales, std::int64_t rows,
                      std::int64_t cols, element out_type, std::uint16_t* out, const cpu_options& o) {
  const std::int64_t k_tiles = cols / lp::lut_cols;
  detail::parallel_ranges(rows / lp::lut_rows, o.threads, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t t = first; t < last; ++t)
      for (std::int64_t j = 0; j < k_tiles; ++j) {
        const std::int64_t at = t * k_tiles + j;
        std::uint16_t* tile = out + t * lp::lut_rows * cols + j * lp::lut_cols;
        lp::lut_decode_tile(packed + at * lp::lut_packed_bytes, codebooks + at * lp::lut_entries, scales[at], [&](int r, int k, float v) {
          tile[r * cols + k] = out_type == element::f16 ? lp::to_fp16(v) : fp8::to_bf16(v);
        });
      }
  });
}

void hadamard_rotate(const input_view& x, std::int64_t size, void* out, const cpu_options& o) {
  const detail::hadamard_table h(size);
  detail::parallel_ranges(x.rows, o.threads, [&](std::int64_t first, std::int64_t last) {
    std::vector<float> row(static_cast<std::size_t>(x.cols)), rotated(row.size());
    for (std::int64_t r = first; r < last; ++r) {
      detail::widen(x, r * x.cols, x.cols, row.data());
      if (x.type == element::f32) {
        detail::rotate_row(row.data(), x.cols, h, x.type, static_cast<float*>(out) + r * x.cols);
        continue;
      }
      detail::rotate_row(row.data(), x.cols, h, x.type, rotated.data());
      auto* bits = static_cast<std::uint16_t*>(out) + r * x.cols;
      for (std::int64_t k = 0; k < x.cols; ++k)  // exact: the values are on the dtype's grid
        bits[k] = x.type == element::f16 ? lp::to_fp16(rotated[static_cast<std::size_t>(k)]) : fp8::to_bf16(rotated[static_cast<std::size_t>(k)]);
    }
  });
}

// Every low-precision formula of the registry: an external table odr-uses each kernel.
namespace detail {
const void* block_quantizer_table() {
  static const auto table = registry::table_of(
      registry::block_quantizer_formula_types,
      [](auto tag) { return &block_quantizer<decltype(tag)>::run; });
  return &table;
}
}  // namespace detail


}  // namespace qpolicy::cpu
