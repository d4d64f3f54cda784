#pragma once
// The low-precision quantizers of low-precision-numerics.md as contract data: one constexpr row per
// formula (the MXFP8 torch and FlashInfer paths, MXFP4 EVEN and RCEIL, INT8 per channel, NVFP4 weights
// and per-token activations), saying how it stores its codes and scales, which block K must tile, the
// scheme and quant key it belongs to and quantize-tensor's name for it. Everything that stores or
// checks a low-precision tensor (quantize-tensor, the kernels' output sizes, the tests' type lists)
// derives from these rows. Plain constexpr data: kernel translation units (nvcc) include it too.
#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/keys/quant_key.hpp"

namespace qpolicy::schemes {

/// One low-precision quantizer (a spec section's formula).
enum class lp_formula : std::uint8_t {
  mxfp8_torch,       // §3.2, MXFP8 weights as Hopper and vLLM's CPU code quantize them
  mxfp8_flashinfer,  // §3.3, MXFP8 on Blackwell (FlashInfer): activations, and weights there
  mxfp4_even,        // §4.2, MXFP4 weights (EVEN scales); also the MoE emulation's activations (§4.3)
  mxfp4_rceil,       // §4.3, MXFP4 activations of Blackwell linear layers (RCEIL)
  int8_per_channel,  // §5.2, INT8 per-channel weights, arithmetic in the model dtype
  nvfp4_weight,      // §6.2, NVFP4 weights of one expert matrix (global scale, e4m3 16-blocks)
  nvfp4_per_token,   // §6.3, NVFP4 per-token activations (FlashInfer's fast-math kernel)
};
inline constexpr std::size_t lp_formula_count = 7;

/// How a formula stores its codes.
enum class code_format : std::uint8_t {
  e4m3,         // one e4m3fn byte per element: [rows, cols]
  e2m1_packed,  // two e2m1 nibbles per byte, element 2j low: [rows, cols / 2]
  int8,         // one int8 per element: [rows, cols]
};
/// How a formula stores its first-level scales.
enum class scale_format : std::uint8_t {
  e8m0,  // one E8M0 byte per block: [rows, cols / block]
  e4m3,  // one e4m3 byte per block: [rows, cols / block]
  f32,   // one float32 per row: [rows, 1]
};
/// A formula's second-level scale, if any.
enum class second_scale : std::uint8_t {
  none,
  per_tensor,  // one float32 for the whole tensor (NVFP4's weight_scale_2): [1]
  per_token,   // one float32 per row (NVFP4's per-token scale): [rows, 1]
};

/// One low-precision quantizer: what it is, how it stores its outputs and what it needs.
struct formula_contract {
  lp_formula id;
  std::string_view name;     // quantize-tensor's --key
  std::string_view section;  // its section of low-precision-numerics.md, for messages
  method scheme;             // the scheme whose weights or activations it quantizes
  std::optional<key_id> key; // its quant key (vLLM has none for per-token NVFP4 activations)
  bool weight;               // quantizes weights (static) rather than activations (dynamic)
  code_format codes;
  scale_format scales;
  std::int64_t block;        // elements per first-level scale along K; 0: one scale per row
  second_scale second;
  std::string_view second_suffix;  // the second scale's tensor suffix in quantize-tensor's output
  bool model_dtype_only;     // computes in the input's dtype, so takes bf16/fp16 only
  std::string_view block_message;  // vLLM's message for a K the block does not tile; {K} is K
};

inline constexpr std::string_view mxfp8_k_message = "MXFP8 requires input_size_per_partition ({K}) to be divisible by 32.";
inline constexpr std::string_view mxfp4_k_message = "MXFP4 requires input_size_per_partition ({K}) to be divisible by 32.";
inline constexpr std::string_view nvfp4_k_message = "last dim must be a multiple of 16, got {K}";

// Order: lp_formula's.
inline constexpr std::array<formula_contract, lp_formula_count> formula_table{{
    {lp_formula::mxfp8_torch, "mxfp8", "§3.2", method::mxfp8, key_id::mxfp8_static, true, code_format::e4m3,
     scale_format::e8m0, 32, second_scale::none, "", false, mxfp8_k_message},
    {lp_formula::mxfp8_flashinfer, "mxfp8_dynamic", "§3.3", method::mxfp8, key_id::mxfp8_dynamic, false, code_format::e4m3,
     scale_format::e8m0, 32, second_scale::none, "", false, mxfp8_k_message},
    {lp_formula::mxfp4_even, "mxfp4", "§4.2", method::mxfp4, key_id::mxfp4_static, true, code_format::e2m1_packed,
     scale_format::e8m0, 32, second_scale::none, "", false, mxfp4_k_message},
    {lp_formula::mxfp4_rceil, "mxfp4_dynamic", "§4.3", method::mxfp4, key_id::mxfp4_dynamic, false,
     code_format::e2m1_packed, scale_format::e8m0, 32, second_scale::none, "", false, mxfp4_k_message},
    {lp_formula::int8_per_channel, "int8_per_channel_static", "§5.2", method::int8_per_channel_weight_only,
     key_id::int8_per_channel_static, true, code_format::int8, scale_format::f32, 0, second_scale::none, "", true, ""},
    {lp_formula::nvfp4_weight, "nvfp4", "§6.2", method::nvfp4_per_token, key_id::nvfp4, true, code_format::e2m1_packed,
     scale_format::e4m3, 16, second_scale::per_tensor, "scale_2", true, nvfp4_k_message},
    {lp_formula::nvfp4_per_token, "nvfp4_per_token", "§6.3", method::nvfp4_per_token, std::nullopt, false,
     code_format::e2m1_packed, scale_format::e4m3, 16, second_scale::per_token, "scale_per_token", true, nvfp4_k_message},
}};

constexpr const formula_contract& formula_of(lp_formula f) { return formula_table[static_cast<std::size_t>(f)]; }

/// The formula quantize-tensor calls `name`, if any.
constexpr std::optional<lp_formula> find_formula(std::string_view name) { return find_by_name(formula_table, name); }

/// The formula that quantizes method `m`'s weights, if it has one.
constexpr std::optional<lp_formula> weight_formula_of(method m) {
  for (const auto& f : formula_table)
    if (f.scheme == m && f.weight) return f.id;
  return std::nullopt;
}

/// The formula names, in table order, for messages and help (only those with block scales when
/// `blocks_only`).
constexpr std::string formula_names(bool blocks_only = false) {
  std::string out;
  for (const auto& f : formula_table)
    if (!blocks_only || f.block) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

/// A message with its {K} replaced by k.
constexpr std::string with_k(std::string_view message, std::int64_t k) {
  std::string out(message);
  if (const auto at = out.find("{K}"); at != std::string::npos) out.replace(at, 3, text::to_decimal(k));
  return out;
}
/// The block message of formula f for K.
constexpr std::string block_message(const formula_contract& f, std::int64_t k) { return with_k(f.block_message, k); }

// ---- what the low-precision schemes' layers run (Hopper, and the CPU) ----

/// What a layer does to its activations before the weight-only GEMM.
enum class activation_treatment : std::uint8_t {
  none,             // the model-dtype activations as they are (Marlin W8A16 / W4A16, Triton int8_w8a16)
  mxfp4_qdq,        // MXFP4 EVEN quantize-dequantize in the model dtype (vLLM's MoE emulation backend, §4.3)
  nvfp4_per_token,  // NVFP4 per-token codes and block scales (§6.3), the token scale applied to the sum:
                    // emulates Blackwell's TRT-LLM NVFP4 MoE (§6.4) on a W4A16 kernel
};

/// One low-precision scheme's layers: its activation treatment and kernel per layer kind, and the
/// MoE sizes it takes.
struct lp_layer_contract {
  method scheme;
  activation_treatment linear, moe;
  std::string_view linear_kernel, moe_kernel;  // what runs, for the plan's notes and the demo
  bool moe_emulated;                           // the MoE path emulates another architecture's numerics
  std::int64_t moe_multiple;                   // hidden and intermediate sizes must be multiples of this
  bool moe_pads;                               // ... or are zero-padded up to it (§4.1) instead of refused
  std::string_view moe_message;                // vLLM's refusal, {K} the size (when not padded)
};

inline constexpr std::array<lp_layer_contract, 4> lp_layer_table{{
    {method::mxfp8, activation_treatment::none, activation_treatment::none, "W8A16: MXFP8 weights dequantized in the kernel (Marlin)",
     "W8A16 experts (Marlin)", false, 32, false, "Online MXFP8 MoE requires hidden/intermediate sizes divisible by 32."},
    {method::mxfp4, activation_treatment::none, activation_treatment::mxfp4_qdq, "W4A16: MXFP4 weights dequantized in the kernel (Marlin)",
     "emulation: activations MXFP4 quantize-dequantized (EVEN), W4A16 experts", true, 32, true, ""},
    {method::int8_per_channel_weight_only, activation_treatment::none, activation_treatment::none, "",
     "W8A16 experts, per-channel scales after the sum (Triton int8_w8a16)", false, 1, false, ""},
    {method::nvfp4_per_token, activation_treatment::none, activation_treatment::nvfp4_per_token, "",
     "emulation of Blackwell's TRT-LLM NVFP4 MoE: per-token NVFP4 activations, W4A16 experts", true, 16, false,
     "last dim must be a multiple of 16, got {K}"},
}};

/// The layer contract of a low-precision scheme; a scheme without one is a logic error (a compile
/// error in constant evaluation).
constexpr const lp_layer_contract& lp_layers_of(method m) {
  for (const auto& row : lp_layer_table)
    if (row.scheme == m) return row;
  throw std::invalid_argument("lp_layers_of: this scheme has no low-precision layer contract (its weights are FP8 or unquantized)");
}

// ---- storage sizes (row-major; the 128x4 layout pads, numerics/low_precision.hpp) ----

/// Bytes of a formula's codes for an [rows, cols] tensor.
constexpr std::int64_t code_bytes(const formula_contract& f, std::int64_t rows, std::int64_t cols) {
  return f.codes == code_format::e2m1_packed ? rows * (cols / 2) : rows * cols;
}
/// First-level scales per row (blocks, or the one scale of a row).
constexpr std::int64_t scales_per_row(const formula_contract& f, std::int64_t cols) { return f.block ? cols / f.block : 1; }
/// The stored shape of a formula's block scales: [rows, cols / block], or in the 128x4 layout (§7)
/// [ceil(rows/128)*128, ceil(blocks/4)*4]; [rows, 1] for per-row float32 scales.
constexpr std::array<std::int64_t, 2> block_scale_shape(const formula_contract& f, std::int64_t rows, std::int64_t cols,
                                                        bool swizzled) {
  const std::int64_t per_row = scales_per_row(f, cols);
  if (!swizzled || !f.block) return {rows, per_row};
  return {(rows + 127) / 128 * 128, (per_row + 3) / 4 * 4};
}

}  // namespace qpolicy::schemes

namespace qpolicy {

/// A low-precision formula as a type (kernels are specialized on it): `formulas::mxfp4_even`.
template <schemes::lp_formula F>
struct formula_tag {
  static constexpr schemes::lp_formula id = F;
  static constexpr std::string_view name = schemes::formula_of(F).name;
};

namespace formulas {
using mxfp8_torch = formula_tag<schemes::lp_formula::mxfp8_torch>;
using mxfp8_flashinfer = formula_tag<schemes::lp_formula::mxfp8_flashinfer>;
using mxfp4_even = formula_tag<schemes::lp_formula::mxfp4_even>;
using mxfp4_rceil = formula_tag<schemes::lp_formula::mxfp4_rceil>;
using int8_per_channel = formula_tag<schemes::lp_formula::int8_per_channel>;
using nvfp4_weight = formula_tag<schemes::lp_formula::nvfp4_weight>;
using nvfp4_per_token = formula_tag<schemes::lp_formula::nvfp4_per_token>;
}  // namespace formulas

namespace schemes {
namespace detail {
template <std::size_t... I>
auto formula_tags(std::index_sequence<I...>) -> std::tuple<formula_tag<static_cast<lp_formula>(I)>...>;
}  // namespace detail
/// Every formula tag, in table order (the type list kernels' tests and instantiations walk).
using formula_list = decltype(detail::formula_tags(std::make_index_sequence<lp_formula_count>{}));
}  // namespace schemes

}  // namespace qpolicy
