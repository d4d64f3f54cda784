#pragma once
// The formula table: one constexpr row per quantizer, the six FP8 keys of fp8-numerics.md and the seven
// low-precision formulas of low-precision-numerics.md. A row says how the formula stores its codes and
// scales (types, grid, second-level scale), how it rounds its scale, what K must be a multiple of (with
// vLLM's message), whether it computes in the model dtype, which options it takes and which transform
// runs before it. Everything that stores, checks or dispatches a quantized tensor derives from these
// rows: quantize-tensor's keys and refusals, the stored parts, the kernels' output sizes and
// instantiations, the tests' type lists (schemes/registry.hpp). Plain constexpr data: kernel
// translation units (nvcc) include it too.
#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/keys/quant_key.hpp"

namespace qpolicy::schemes {

/// Every quantizer, one value per row of formula_table (same order).
enum class formula : std::uint8_t {
  fp8_per_tensor_static,   // fp8 §4, weights: one float32 scale, reciprocal multiply
  fp8_per_tensor_dynamic,  // fp8 §5, activations: one float32 scale per call
  fp8_per_token,           // fp8 §5, activations: one float32 scale per row
  fp8_per_channel_static,  // fp8 §6, weights: one float32 scale per output channel (row)
  fp8_per_block_static,    // fp8 §8, weights: one float32 scale per 128x128 block
  fp8_per_block_dynamic,   // fp8 §7, activations: one float32 scale per 1x128 group
  mxfp8_torch,             // low-precision §3.2, MXFP8 weights as Hopper and vLLM's CPU code quantize them
  mxfp8_flashinfer,        // §3.3, MXFP8 on Blackwell (FlashInfer): activations, and weights there
  mxfp4_even,              // §4.2, MXFP4 weights (EVEN scales); also the MoE emulation's activations (§4.3)
  mxfp4_rceil,             // §4.3, MXFP4 activations of Blackwell linear layers (RCEIL)
  int8_per_channel,        // §5.2, INT8 per-channel weights, arithmetic in the model dtype
  nvfp4_weight,            // §6.2, NVFP4 weights of one expert matrix (global scale, e4m3 16-blocks)
  nvfp4_per_token,         // §6.3, NVFP4 per-token activations (FlashInfer's fast-math kernel)
  mxfp4_hadamard_weight,   // new-schemes A.3-A.4: 32-column Hadamard rotation, then MXFP4 EVEN (weights)
  mxfp4_hadamard_even,     // A.5 emulation: the rotated activations' EVEN quantize
  mxfp4_hadamard_rceil,    // A.5 Blackwell FlashInfer: the rotated activations' RCEIL quantize (UNCONFIRMED)
  lut_b,                   // B.2-B.3: LUT-B, 3-bit indices into an e4m3 codebook per 8x64 tile
};

/// How a formula stores its codes. A code format is a storage form, independent of the scale: a
/// lookup-table format (indices into a per-tile codebook) is one more value here.
enum class code_format : std::uint8_t {
  e4m3,         // one e4m3fn byte per element: [rows, cols]
  e2m1_packed,  // two e2m1 nibbles per byte, element 2j low: [rows, cols / 2]
  int8,         // one int8 per element: [rows, cols]
  lut3_tiles,   // 8x64 tiles of 3-bit codebook indices, 8 to 3 bytes: [rows / 8, cols / 64, 192]
};
/// How a formula stores its first-level scales.
enum class scale_format : std::uint8_t {
  e8m0,  // one E8M0 byte per block
  e4m3,  // one e4m3 byte per block
  f32,   // float32
};
/// How a formula rounds its first-level scale.
enum class scale_rounding : std::uint8_t {
  none,         // float32 amax over the code range, unrounded
  ue8m0_option, // float32, or rounded up to a power of two with --ue8m0 (FP8 groups and blocks)
  e8m0_ceil,    // E8M0 of max(amax, tiny) / max code, rounded up (MXFP8 torch)
  e8m0_rp,      // E8M0 of amax * (1 / max code), rounded up in the exponent (FlashInfer RCEIL / RP)
  e8m0_even,    // E8M0 from amax's exponent (MXFP4 EVEN)
  e4m3_sat,     // e4m3 of the block scale times the global scale, saturating (NVFP4)
  model_dtype,  // rD(amax / 127) in the input's dtype (INT8)
};
/// A formula's second-level scale, if any.
enum class second_scale : std::uint8_t {
  none,
  per_tensor,  // one float32 for the whole tensor (NVFP4's weight_scale_2): [1]
  per_token,   // one float32 per row (NVFP4's per-token scale): [rows, 1]
  codebook,    // eight ascending e4m3 values per tile (LUT-B): [rows / 8, cols / 64, 8]
};
/// What the options of quantize-tensor mean to a formula's scales.
enum class scale_options : std::uint8_t {
  fp8,          // --ue8m0 and the column layouts apply to 1x128 groups and 128x128 blocks; not swizzled
  byte_blocks,  // byte block scales: row-major or the 128x4 layout (swizzled); not --ue8m0 or columns
  row_floats,   // one float32 per row: none of them
};
/// A transform applied to the input along K before the formula's quantizer.
enum class pre_transform : std::uint8_t {
  none,
  hadamard,  // each `transform_size`-column block times the normalized Sylvester matrix, rounded once to D
};

/// One quantizer: what it is, how it stores its outputs and what it takes.
struct formula_row {
  formula id;
  std::string_view name;     // quantize-tensor's --key
  std::string_view section;  // its section of the spec, for messages
  std::optional<key_id> key; // its quant key (vLLM has none for per-token NVFP4 activations)
  bool weight;               // quantizes weights (static) rather than activations (dynamic)
  code_format codes;
  scale_format scales;
  group_shape group;         // one first-level scale per group (the key table's convention)
  scale_rounding rounding;
  second_scale second;
  std::string_view second_suffix;  // the second scale's tensor suffix in quantize-tensor's output
  bool model_dtype_only;     // computes in the input's dtype, so takes bf16/fp16 only
  scale_options options;
  bool takes_amax;           // a given amax may set its per-tensor scale (a joint unit's, a whole tensor's)
  std::int64_t k_multiple;   // K must be a multiple of this (1: any K)
  std::string_view k_message;  // the refusal of another K; {K} is K
  pre_transform transform;
  std::int64_t transform_size;
  formula base;              // the quantizer after the transform (the row itself when there is none)
  std::int64_t tile_rows = 1;  // rows a scale spans (LUT-B's tiles: 8); N must be a multiple of it

  /// Elements per byte block scale along K; 0 for float32 scales.
  constexpr std::int64_t block() const { return scales == scale_format::f32 ? 0 : group.col; }
  /// Whether one scale spans several rows (a tile), so the scales form a [rows / tile_rows, cols / block] grid.
  constexpr bool tiled() const { return tile_rows > 1; }
  /// Whether this is a low-precision formula (byte codes other than FP8's float32-scaled ones).
  constexpr bool low_precision() const { return options != scale_options::fp8; }
};

inline constexpr std::string_view mxfp8_k_message = "MXFP8 requires input_size_per_partition ({K}) to be divisible by 32.";
inline constexpr std::string_view mxfp4_k_message = "MXFP4 requires input_size_per_partition ({K}) to be divisible by 32.";
inline constexpr std::string_view nvfp4_k_message = "last dim must be a multiple of 16, got {K}";
inline constexpr std::string_view hadamard_k_message = "Input size per partition {K} is not divisible by the Hadamard size 32.";
inline constexpr std::string_view lut_b_message = "LUT-B requires dims divisible by (8, 64), got ({N}, {K})";
inline constexpr std::string_view group_k_message = "1x128 groups need K to be a multiple of 128, got K = {K}";

namespace detail {
/// A row of an FP8 key: e4m3 codes and float32 scales on the key's group shape.
constexpr formula_row fp8_row(formula id, key_id key, std::string_view section, scale_rounding rounding, bool amax = false) {
  const bool groups = !key_of(key).scale.is_static && key_of(key).scale.group.row == 1 && key_of(key).scale.group.col > 0;
  return {id, key_table[static_cast<std::size_t>(key)].name, section, key, key_of(key).scale.is_static, code_format::e4m3,
          scale_format::f32, key_of(key).scale.group, rounding, second_scale::none, "", false, scale_options::fp8, amax,
          groups ? key_of(key).scale.group.col : 1, groups ? group_k_message : "", pre_transform::none, 0, id};
}
/// A low-precision row.
constexpr formula_row block_formula_row(formula id, std::string_view name, std::string_view section, std::optional<key_id> key, bool weight,
                                        code_format codes, scale_format scales, std::int64_t block, scale_rounding rounding,
                                        second_scale second, std::string_view second_suffix, bool model_dtype_only,
                                        std::string_view k_message) {
  const group_shape group = block ? group_shape{1, static_cast<std::int32_t>(block)} : per_channel;
  return {id, name, section, key, weight, codes, scales, group, rounding, second, second_suffix, model_dtype_only,
          block ? scale_options::byte_blocks : scale_options::row_floats, second == second_scale::per_tensor,
          block ? block : 1, k_message, pre_transform::none, 0, id};
}
/// The two MXFP4 rows, also the bases of the rotating rows.
inline constexpr formula_row mxfp4_even_row = block_formula_row(formula::mxfp4_even, "mxfp4", "§4.2", key_id::mxfp4_static, true, code_format::e2m1_packed,
                                                                scale_format::e8m0, 32, scale_rounding::e8m0_even, second_scale::none, "", false,
                                                                mxfp4_k_message);
inline constexpr formula_row mxfp4_rceil_row = block_formula_row(formula::mxfp4_rceil, "mxfp4_dynamic", "§4.3", key_id::mxfp4_dynamic, false,
                                                                 code_format::e2m1_packed, scale_format::e8m0, 32, scale_rounding::e8m0_rp,
                                                                 second_scale::none, "", false, mxfp4_k_message);
/// A row that rotates 32-column blocks before the quantizer of row `base`, and stores what it stores;
/// `key` and `weight` say what it quantizes (its key names the unrotated formula, formula_of_key).
constexpr formula_row rotated_row(formula id, std::string_view name, key_id key, bool weight, const formula_row& base) {
  formula_row r = base;
  r.id = id;
  r.name = name;
  r.section = "new-schemes §A";
  r.key = key;
  r.weight = weight;
  r.k_multiple = 32;
  r.k_message = hadamard_k_message;
  r.transform = pre_transform::hadamard;
  r.transform_size = 32;
  r.base = base.id;
  return r;
}
/// LUT-B (new-schemes §B): per 8x64 tile, 3-bit indices into eight ascending e4m3 values and one E8M0
/// scale (MXFP8's CEIL of the tile's amax), the codebook fitted by Lloyd iterations.
constexpr formula_row lut_b_row() {
  formula_row r = block_formula_row(formula::lut_b, "lut_b", "new-schemes §B", key_id::lut_b, true, code_format::lut3_tiles,
                                    scale_format::e8m0, 64, scale_rounding::e8m0_ceil, second_scale::codebook, "codebook", false, lut_b_message);
  r.group = key_of(key_id::lut_b).scale.group;
  r.tile_rows = 8;
  return r;
}
}  // namespace detail

// Order: formula's.
inline constexpr auto formula_table = std::to_array<formula_row>({
    detail::fp8_row(formula::fp8_per_tensor_static, key_id::fp8_per_tensor_static, "§4", scale_rounding::none, true),
    detail::fp8_row(formula::fp8_per_tensor_dynamic, key_id::fp8_per_tensor_dynamic, "§5", scale_rounding::none),
    detail::fp8_row(formula::fp8_per_token, key_id::fp8_per_token, "§5", scale_rounding::none),
    detail::fp8_row(formula::fp8_per_channel_static, key_id::fp8_per_channel_static, "§6", scale_rounding::none),
    detail::fp8_row(formula::fp8_per_block_static, key_id::fp8_per_block_static, "§8", scale_rounding::ue8m0_option),
    detail::fp8_row(formula::fp8_per_block_dynamic, key_id::fp8_per_block_dynamic, "§7", scale_rounding::ue8m0_option),
    detail::block_formula_row(formula::mxfp8_torch, "mxfp8", "§3.2", key_id::mxfp8_static, true, code_format::e4m3, scale_format::e8m0, 32,
                              scale_rounding::e8m0_ceil, second_scale::none, "", false, mxfp8_k_message),
    detail::block_formula_row(formula::mxfp8_flashinfer, "mxfp8_dynamic", "§3.3", key_id::mxfp8_dynamic, false, code_format::e4m3,
                              scale_format::e8m0, 32, scale_rounding::e8m0_rp, second_scale::none, "", false, mxfp8_k_message),
    detail::mxfp4_even_row,
    detail::mxfp4_rceil_row,
    detail::block_formula_row(formula::int8_per_channel, "int8_per_channel_static", "§5.2", key_id::int8_per_channel_static, true,
                              code_format::int8, scale_format::f32, 0, scale_rounding::model_dtype, second_scale::none, "", true, ""),
    detail::block_formula_row(formula::nvfp4_weight, "nvfp4", "§6.2", key_id::nvfp4, true, code_format::e2m1_packed, scale_format::e4m3, 16,
                              scale_rounding::e4m3_sat, second_scale::per_tensor, "scale_2", true, nvfp4_k_message),
    detail::block_formula_row(formula::nvfp4_per_token, "nvfp4_per_token", "§6.3", std::nullopt, false, code_format::e2m1_packed,
                              scale_format::e4m3, 16, scale_rounding::e4m3_sat, second_scale::per_token, "scale_per_token", true,
                              nvfp4_k_message),
    detail::rotated_row(formula::mxfp4_hadamard_weight, "mxfp4_hadamard32", key_id::mxfp4_static, true, detail::mxfp4_even_row),
    detail::rotated_row(formula::mxfp4_hadamard_even, "mxfp4_hadamard32_dynamic", key_id::mxfp4_dynamic, false, detail::mxfp4_even_row),
    detail::rotated_row(formula::mxfp4_hadamard_rceil, "mxfp4_hadamard32_rceil", key_id::mxfp4_dynamic, false, detail::mxfp4_rceil_row),
    detail::lut_b_row(),
});
/// How many formulas there are: the table's rows, one per `formula` value in its order.
inline constexpr std::size_t formula_count = formula_table.size();
static_assert(formula_table[formula_count - 1].id == static_cast<formula>(formula_count - 1),
              "formula_table has one row per formula, in order");

constexpr const formula_row& formula_of(formula f) { return formula_table[static_cast<std::size_t>(f)]; }

/// The formula quantize-tensor calls `name`, if any: the low-precision names first (`mxfp8` is the
/// MXFP8 weight formula there, cli.md), then the FP8 key names.
constexpr std::optional<formula> find_formula(std::string_view name) {
  for (const auto& f : formula_table)
    if (f.low_precision() && f.name == name) return f.id;
  return find_by_name(formula_table, name);
}

/// The formula of quant key `k`'s quantizer, if it has one (without a transform).
constexpr std::optional<formula> formula_of_key(key_id k) {
  for (const auto& f : formula_table)
    if (f.key == k && f.transform == pre_transform::none) return f.id;
  return std::nullopt;
}

/// The weight formula that rotates its input before weight formula `base` (a Hadamard layer's weights),
/// if the table has one.
constexpr std::optional<formula> rotated_weight_formula(formula base) {
  for (const auto& f : formula_table)
    if (f.transform == pre_transform::hadamard && f.weight && f.base == base) return f.id;
  return std::nullopt;
}

/// The formula names, in table order, for messages and help: the FP8 or the low-precision ones, or
/// (`byte_blocks_only`) those whose block scales may be swizzled.
constexpr std::string formula_names(bool low_precision, bool byte_blocks_only = false) {
  std::string out;
  for (const auto& f : formula_table)
    if (f.low_precision() == low_precision && (!byte_blocks_only || (f.block() && !f.tiled())))
      out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

/// A message with its {K} replaced by k (and its {N} by n).
constexpr std::string with_k(std::string_view message, std::int64_t k, std::int64_t n = 0) {
  std::string out(message);
  if (const auto at = out.find("{N}"); at != std::string::npos) out.replace(at, 3, text::to_decimal(n));
  if (const auto at = out.find("{K}"); at != std::string::npos) out.replace(at, 3, text::to_decimal(k));
  return out;
}
/// The refusal of formula f for K (and N, for a tiled formula).
constexpr std::string block_message(const formula_row& f, std::int64_t k, std::int64_t n = 0) { return with_k(f.k_message, k, n); }
/// vLLM's refusal of a K that a Hadamard size does not divide (InputHadamardLinearMethod).
constexpr std::string hadamard_size_message(std::int64_t k, std::int64_t size) {
  return "Input size per partition " + text::to_decimal(k) + " is not divisible by the Hadamard size " + text::to_decimal(size) + ".";
}
/// Whether formula f takes an [n, k] tensor's shape (K a multiple of its block, N of its tile's rows).
constexpr bool takes_shape(const formula_row& f, std::int64_t n, std::int64_t k) {
  return k % f.k_multiple == 0 && n % f.tile_rows == 0;
}

// ---- storage sizes (row-major; the 128x4 layout pads, numerics/block_formats.hpp) ----

/// LUT-B's bytes of packed indices per 8x64 tile, and codebook entries per tile.
inline constexpr std::int64_t lut_tile_bytes = 192;
inline constexpr std::int64_t lut_codebook_size = 8;

/// Bytes of a formula's codes for an [rows, cols] tensor.
constexpr std::int64_t code_bytes(const formula_row& f, std::int64_t rows, std::int64_t cols) {
  if (f.codes == code_format::lut3_tiles) return rows / f.tile_rows * (cols / f.block()) * lut_tile_bytes;
  return f.codes == code_format::e2m1_packed ? rows * (cols / 2) : rows * cols;
}
/// First-level scales per row of scales (blocks, or the one scale of a row; a tiled formula's tiles
/// along K).
constexpr std::int64_t scales_per_row(const formula_row& f, std::int64_t cols) { return f.block() ? cols / f.block() : 1; }
/// Rows of first-level scales: one per row, or one per tile of rows.
constexpr std::int64_t scale_rows(const formula_row& f, std::int64_t rows) { return rows / f.tile_rows; }
/// First-level scales of an [rows, cols] tensor (row-major).
constexpr std::int64_t scale_count(const formula_row& f, std::int64_t rows, std::int64_t cols) {
  return scale_rows(f, rows) * scales_per_row(f, cols);
}
/// The stored shape of a formula's block scales: [rows, cols / block] ([rows / 8, cols / 64] for LUT-B's
/// tiles), or in the 128x4 layout (§7) [ceil(rows/128)*128, ceil(blocks/4)*4]; [rows, 1] for per-row
/// float32 scales.
constexpr std::array<std::int64_t, 2> block_scale_shape(const formula_row& f, std::int64_t rows, std::int64_t cols,
                                                        bool swizzled) {
  const std::int64_t per_row = scales_per_row(f, cols);
  if (!swizzled || !f.block()) return {scale_rows(f, rows), per_row};
  return {(rows + 127) / 128 * 128, (per_row + 3) / 4 * 4};
}

}  // namespace qpolicy::schemes

namespace qpolicy {

/// A formula as a type (kernels are specialized on it): `formulas::mxfp4_even`.
template <schemes::formula F>
struct formula_tag {
  static constexpr schemes::formula id = F;
  static constexpr std::string_view name = schemes::formula_of(F).name;
};

/// The formula tags by name (the registry lists them all, schemes/registry.hpp).
namespace formulas {
using fp8_per_tensor_static = formula_tag<schemes::formula::fp8_per_tensor_static>;
using fp8_per_tensor_dynamic = formula_tag<schemes::formula::fp8_per_tensor_dynamic>;
using fp8_per_token = formula_tag<schemes::formula::fp8_per_token>;
using fp8_per_channel_static = formula_tag<schemes::formula::fp8_per_channel_static>;
using fp8_per_block_static = formula_tag<schemes::formula::fp8_per_block_static>;
using fp8_per_block_dynamic = formula_tag<schemes::formula::fp8_per_block_dynamic>;
using mxfp8_torch = formula_tag<schemes::formula::mxfp8_torch>;
using mxfp8_flashinfer = formula_tag<schemes::formula::mxfp8_flashinfer>;
using mxfp4_even = formula_tag<schemes::formula::mxfp4_even>;
using mxfp4_rceil = formula_tag<schemes::formula::mxfp4_rceil>;
using int8_per_channel = formula_tag<schemes::formula::int8_per_channel>;
using nvfp4_weight = formula_tag<schemes::formula::nvfp4_weight>;
using nvfp4_per_token = formula_tag<schemes::formula::nvfp4_per_token>;
using mxfp4_hadamard_weight = formula_tag<schemes::formula::mxfp4_hadamard_weight>;
using mxfp4_hadamard_even = formula_tag<schemes::formula::mxfp4_hadamard_even>;
using mxfp4_hadamard_rceil = formula_tag<schemes::formula::mxfp4_hadamard_rceil>;
using lut_b = formula_tag<schemes::formula::lut_b>;
}  // namespace formulas

/// The formula tag of quant key tag Key's quantizer.
template <class Key>
using formula_of_key_t = formula_tag<*schemes::formula_of_key(Key::id)>;

}  // namespace qpolicy
