#pragma once
// The scheme contract: one constexpr row per scheme (plan method) and one per activation quantizer,
// from which everything after the plan derives -- the dispatch table of the planner, the closed tag
// lists of the dispatch, the kernels' scale layouts and pairing rule, the `quantize-tensor` key list,
// the checkpoint's tensor names and config block, and the shape checks of `plan --check-shapes`.
// Adding a scheme starts here (docs/architecture.md, "Adding a scheme"). Plain constexpr data: kernel
// translation units (nvcc) include it too.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "qpolicy/keys/release.hpp"
#include "qpolicy/schemes/formulas.hpp"
#include "qpolicy/schemes/tags.hpp"
#include "qpolicy/numerics/gemm_desc.hpp"

namespace qpolicy::schemes {

using fp8::activation_quant;
using fp8::weight_scales;

/// What a scheme does with a layer's activations.
enum class activation_path : std::uint8_t {
  dynamic,      // quantized per call by the scheme's activation key
  weight_only,  // left in the model's dtype; only the weights are quantized
};

/// Which GEMM a scheme's layers run.
enum class gemm_kind : std::uint8_t {
  scaled_fp8,   // W8A8: FP8 codes times FP8 activations, the scales outside the sums (dense, or grouped over experts)
  weight_only,  // W8A16 / W4A16: the weights decoded in the kernel, activations in the model dtype (after a treatment)
  none,         // no kernel in this build yet: the scheme plans, and its layers are marked so
};

/// What a layer does to its activations before its GEMM.
enum class activation_treatment : std::uint8_t {
  fp8_key,          // quantized per call by the layer's dynamic FP8 activation key (the scaled FP8 GEMM)
  none,             // the model-dtype activations as they are (Marlin W8A16 / W4A16, Triton int8_w8a16)
  mxfp4_qdq,        // MXFP4 EVEN quantize-dequantize in the model dtype (vLLM's MoE emulation backend, §4.3)
  nvfp4_per_token,  // NVFP4 per-token codes and block scales (§6.3), the token scale applied to the sum:
                    // emulates Blackwell's TRT-LLM NVFP4 MoE (§6.4) on a W4A16 kernel
  mxfp8_qdq,        // MXFP8 quantize-dequantize on the torch path (CEIL), to bf16 (LUT-B's emulation, new-schemes §B.5)
  rotated,          // the Hadamard rotation of the input, rounded to the model dtype (new-schemes §A.3; Marlin on Hopper)
  rotated_mxfp4_qdq,  // the rotation, then MXFP4 EVEN quantize-dequantize (§A.5, vLLM's emulation kernel)
};

/// One scheme: a method of the plan as the kernels, the checkpoint writer and the shape checks see it:
/// its weight formula (through its weight key), its activation treatment per layer kind, its GEMM and
/// its MoE rules.
struct scheme_contract {
  method id;
  key_id weight_key;                   // the key whose formula quantizes the weights
  bool linear, moe;                    // the layer kinds its weight key selects it for (spec §3.6)
  activation_path activation;
  std::optional<key_id> linear_activation, moe_activation;  // default activation keys (spec §10's table)
  /// The layout of the weight scales; nullopt while the scheme has no kernel in this build (it still
  /// plans: the vocabulary is vLLM's, the kernels come scheme by scheme).
  std::optional<weight_scales> scales;
  std::optional<key_id> moe_w13_key;   // the formula of a MoE layer's w13 when it is not the weight key's (spec §9)
  std::string_view checkpoint_scale;   // the scale tensor's suffix in a checkpoint: P.weight_scale(_inv)
  std::int64_t preferred_multiple;     // dimensions the GEMMs like a multiple of (a shape warning, not an error)
  gemm_kind gemm = gemm_kind::scaled_fp8;
  activation_treatment linear_treatment = activation_treatment::fp8_key, moe_treatment = activation_treatment::fp8_key;
  std::string_view linear_kernel{}, moe_kernel{};  // what runs, for the plan's notes and the demo (weight-only schemes)
  std::int64_t moe_multiple = 1;                   // hidden and intermediate sizes must be multiples of this
  bool moe_pads = false;                           // ... or are zero-padded up to it instead of refused
  std::string_view moe_message{};                  // vLLM's refusal, {K} the size (when not padded)
};

// Order: how messages list the schemes.
inline constexpr auto scheme_table = std::to_array<scheme_contract>({
    {method::fp8_per_tensor, key_id::fp8_per_tensor_static, true, true, activation_path::dynamic,
     key_id::fp8_per_tensor_dynamic, key_id::fp8_per_tensor_dynamic, weight_scales::per_tensor, std::nullopt,
     "weight_scale", 16},
    // Per-channel MoE: w13's rows follow the per-token rule (the online path quantizes w13 as activations).
    {method::fp8_per_channel, key_id::fp8_per_channel_static, true, true, activation_path::dynamic, key_id::fp8_per_token,
     key_id::fp8_per_token, weight_scales::per_channel, key_id::fp8_per_token, "weight_scale", 16},
    // Per-block MoE pads I and H to whole 128x128 blocks (fp8-numerics.md §9).
    {method::fp8_per_block, key_id::fp8_per_block_static, true, true, activation_path::dynamic,
     key_id::fp8_per_block_dynamic, key_id::fp8_per_block_dynamic, weight_scales::block_128x128, std::nullopt,
     "weight_scale_inv", 128, gemm_kind::scaled_fp8, activation_treatment::fp8_key, activation_treatment::fp8_key, {}, {}, 128,
     true},
    {method::mxfp8, key_id::mxfp8_static, true, true, activation_path::dynamic, key_id::mxfp8_dynamic,
     key_id::mxfp8_dynamic, std::nullopt, std::nullopt, "weight_scale", 32, gemm_kind::weight_only, activation_treatment::none,
     activation_treatment::none, "W8A16: MXFP8 weights dequantized in the kernel (Marlin)", "W8A16 experts (Marlin)", 32,
     false, "Online MXFP8 MoE requires hidden/intermediate sizes divisible by 32."},
    {method::mxfp4, key_id::mxfp4_static, true, true, activation_path::dynamic, key_id::mxfp4_dynamic,
     key_id::mxfp4_dynamic, std::nullopt, std::nullopt, "weight_scale", 32, gemm_kind::weight_only, activation_treatment::none,
     activation_treatment::mxfp4_qdq, "W4A16: MXFP4 weights dequantized in the kernel (Marlin)",
     "emulation: activations MXFP4 quantize-dequantized (EVEN), W4A16 experts", 32, true},
    {method::int8_per_channel_weight_only, key_id::int8_per_channel_static, false, true, activation_path::weight_only,
     std::nullopt, std::nullopt, std::nullopt, std::nullopt, "weight_scale", 16, gemm_kind::weight_only, activation_treatment::none,
     activation_treatment::none, {}, "W8A16 experts, per-channel scales after the sum (Triton int8_w8a16)"},
    // Per-token NVFP4 activations have no quant key of their own in vLLM's vocabulary.
    {method::nvfp4_per_token, key_id::nvfp4, false, true, activation_path::dynamic, std::nullopt, std::nullopt,
     std::nullopt, std::nullopt, "weight_scale", 16, gemm_kind::weight_only, activation_treatment::none,
     activation_treatment::nvfp4_per_token, {},
     "emulation of Blackwell's TRT-LLM NVFP4 MoE: per-token NVFP4 activations, W4A16 experts", 16, false,
     "last dim must be a multiple of 16, got {K}"},
    // LUT-B experts (vLLM 0.34): emulated as on every GPU but Rubin, the tiles decoded in the weight-only GEMM.
    {method::lut_b_moe, key_id::lut_b, false, true, activation_path::dynamic, std::nullopt, std::nullopt, std::nullopt,
     std::nullopt, "weight_scale", 64, gemm_kind::weight_only, activation_treatment::none, activation_treatment::mxfp8_qdq, {},
     "emulation of LUT-B MoE: activations MXFP8 quantize-dequantized (CEIL), LUT-B experts decoded per K panel", 64, false,
     lut_b_message},
});

/// A scheme as vLLM's online methods see it: the method classes that take its layers (messages name
/// them), whether they accept an explicit activation (0.34), and whether its linear method takes a
/// Hadamard rotation of its input (0.34's InputHadamardLinearMethod).
struct online_method_row {
  method id;
  std::string_view linear_class, moe_class;
  bool accepts_activation_override = false;
  bool rotates_input = false;
};
inline constexpr auto online_method_table = std::to_array<online_method_row>({
    {method::fp8_per_tensor, "Fp8PerTensorOnlineLinearMethod", "Fp8PerTensorOnlineMoEMethod"},
    {method::fp8_per_channel, "Fp8PtpcOnlineLinearMethod", "Fp8PtpcOnlineMoEMethod"},
    {method::fp8_per_block, "Fp8PerBlockOnlineLinearMethod", "Fp8PerBlockOnlineMoEMethod"},
    {method::mxfp8, "Mxfp8OnlineLinearMethod", "Mxfp8OnlineMoEMethod"},
    {method::mxfp4, "Mxfp4OnlineLinearMethod", "Mxfp4OnlineMoEMethod", true, true},
    {method::int8_per_channel_weight_only, "", "Int8OnlineMoEMethod"},
    {method::nvfp4_per_token, "", "Nvfp4OnlineMoEMethod"},
    {method::lut_b_moe, "", "LutBOnlineMoEMethod"},
});

// Lookups return indices and values, not pointers: GCC 12's UBSan (-fsanitize=null) makes a pointer's
// comparison with null non-constant, and these run during constant evaluation in every kernel TU.

/// The row of method `m` in scheme_table, or scheme_table.size() for `none` and `unquantized`.
constexpr std::size_t contract_index(method m) {
  std::size_t i = 0;
  while (i < scheme_table.size() && scheme_table[i].id != m) ++i;
  return i;
}
/// Whether a method has a contract (every quantizing method does).
constexpr bool has_contract(method m) { return contract_index(m) < scheme_table.size(); }
/// The contract of a quantizing method (has_contract(m) must hold).
constexpr const scheme_contract& contract_of(method m) { return scheme_table[contract_index(m)]; }

/// Whether a method's layers run the scaled FP8 GEMM (its row has a weight-scale layout).
constexpr bool has_fp8_gemm(method m) {
  return has_contract(m) && contract_of(m).gemm == gemm_kind::scaled_fp8 && contract_of(m).scales.has_value();
}
/// Whether a method's layers run the weight-only GEMM.
constexpr bool is_weight_only(method m) { return has_contract(m) && contract_of(m).gemm == gemm_kind::weight_only; }
/// Whether this build has kernels for a method's layers: the scaled FP8 GEMM or the weight-only GEMM.
constexpr bool has_kernels(method m) {
  return has_fp8_gemm(m) || is_weight_only(m);
}

/// The formula of method m's weights when its layers run the weight-only GEMM (their low-precision
/// weight formula), if they do.
constexpr std::optional<formula> weight_formula_of(method m) {
  if (!is_weight_only(m)) return std::nullopt;
  return formula_of_key(contract_of(m).weight_key);
}

/// A layer kind's activation treatment under method m (has_contract(m) must hold).
constexpr activation_treatment treatment_of(method m, layer_kind kind) {
  return kind == layer_kind::moe ? contract_of(m).moe_treatment : contract_of(m).linear_treatment;
}

/// Whether a treatment rotates the input (a Hadamard transform before the GEMM).
constexpr bool rotates(activation_treatment t) {
  return t == activation_treatment::rotated || t == activation_treatment::rotated_mxfp4_qdq;
}

/// A method's default activation key for a layer kind, if it has one.
constexpr std::optional<key_id> default_activation(method m, layer_kind kind) {
  if (!has_contract(m)) return std::nullopt;
  return kind == layer_kind::moe ? contract_of(m).moe_activation : contract_of(m).linear_activation;
}

/// Whether online_method_table has a row for method m.
constexpr bool has_online_method_row(method m) {
  for (const auto& row : online_method_table)
    if (row.id == m) return true;
  return false;
}
/// Every quantizing method (all but `none` and `unquantized`) has its row, and no other does.
static_assert(
    [] {
      for (std::size_t i = 0; i < method_count; ++i) {
        const auto m = static_cast<method>(i);
        if (has_online_method_row(m) != (m != method::none && m != method::unquantized)) return false;
      }
      return online_method_table.size() == method_count - 2;
    }(),
    "online_method_table has one row for each quantizing method");

/// The online method row of a quantizing method; a method without one (none, unquantized) is an error,
/// at compile time where the call is constant-evaluated.
constexpr const online_method_row& online_method_of(method m) {
  for (const auto& row : online_method_table)
    if (row.id == m) return row;
  throw std::invalid_argument("online_method_of: method '" + std::string(to_string(m)) + "' quantizes nothing and has no online method row");
}

/// Whether a weight-only layer of kind `kind` under method m may take treatment t: its row's, or, for
/// a linear method that rotates its input (0.34's InputHadamardLinearMethod), the rotation with the
/// row's treatment (Marlin) or with MXFP4 quantize-dequantize (the emulation kernel).
constexpr bool takes_treatment(method m, layer_kind kind, activation_treatment t) {
  if (t == treatment_of(m, kind)) return true;
  return kind == layer_kind::linear && online_method_of(m).rotates_input && rotates(t);
}

/// Whether release r can name or hold a key: a QUANT_KEY_NAMES entry of it, or the slot of one of its
/// shorthands. A release's dispatch tables hold exactly the schemes whose weight key it has.
constexpr bool release_has_key(key_id k, vllm_release r) {
  if (has_name(k, r)) return true;
  for (const auto& s : shorthand_table)
    if (holds(entry(r).shorthands, s.id) && (shorthand_weight(s.id, layer_kind::linear, r) == k ||
                                             shorthand_weight(s.id, layer_kind::moe, r) == k))
      return true;
  return false;
}

/// The dispatch table of release r (spec §3.6, §9): the method a weight key selects for a layer kind.
constexpr std::optional<method> dispatch_method(key_id weight, layer_kind kind, vllm_release r = newest_release) {
  for (const auto& c : scheme_table) {
    const key_id k = release_key(c.weight_key, r);
    if (k == weight && release_has_key(k, r) &&
        (kind == layer_kind::linear ? c.linear : kind == layer_kind::moe && c.moe))
      return c.id;
  }
  return std::nullopt;
}

/// The sorted printed keys that `kind` supports in release r, as the dispatch-miss message lists them.
constexpr std::string supported_weight_keys_repr(layer_kind kind, vllm_release r = newest_release) {
  std::array<std::string, key_count> printed{};
  std::size_t n = 0;
  for (const auto& e : key_table)
    if (dispatch_method(e.id, kind, r)) printed[n++] = to_string(e.key);
  for (std::size_t i = 1; i < n; ++i)  // insertion sort: constexpr and tiny
    for (std::size_t j = i; j > 0 && printed[j] < printed[j - 1]; --j) std::swap(printed[j], printed[j - 1]);
  return text::py_repr_list(std::span<const std::string>(printed.data(), n));
}

/// The sorted linear method classes that take a Hadamard rotation, as vLLM's refusal lists them.
constexpr std::string rotating_classes_repr() {
  std::array<std::string_view, online_method_table.size()> names{};
  std::size_t n = 0;
  for (const auto& row : online_method_table)
    if (row.rotates_input) names[n++] = row.linear_class;
  return sorted_names_repr(std::span<const std::string_view>(names.data(), n));
}

/// One dynamic activation quantizer: its key and the GEMM-side grouping of its scales.
struct activation_contract {
  key_id key;
  activation_quant quant;
};
// Order: how messages list the quantizers.
inline constexpr std::array<activation_contract, 3> activation_table{{
    {key_id::fp8_per_token, activation_quant::per_token},
    {key_id::fp8_per_tensor_dynamic, activation_quant::per_tensor},
    {key_id::fp8_per_block_dynamic, activation_quant::group_128},
}};

/// The row of key `k` in activation_table, or activation_table.size() when it has no quantizer.
constexpr std::size_t activation_index(key_id k) {
  std::size_t i = 0;
  while (i < activation_table.size() && activation_table[i].key != k) ++i;
  return i;
}
/// Whether a key is a dynamic activation key with a quantizer.
constexpr bool has_activation(key_id k) { return activation_index(k) < activation_table.size(); }
/// The GEMM-side grouping of an activation key's scales (has_activation(k) must hold).
constexpr activation_quant activation_quant_of(key_id k) { return activation_table[activation_index(k)].quant; }


/// The methods with kernels, for messages: "fp8_per_tensor, fp8_per_channel, ... and nvfp4_per_token".
constexpr std::string kernel_methods_text() {
  std::string out;
  std::size_t n = 0, total = 0;
  for (const auto& c : scheme_table) total += has_kernels(c.id);
  for (const auto& c : scheme_table) {
    if (!has_kernels(c.id)) continue;
    if (n++) out += n == total ? " and " : ", ";
    out += to_string(c.id);
  }
  return out;
}
/// The method whose weights quant key `k` quantizes with FP8 kernels, or `none`.
constexpr method fp8_weight_method_of(key_id k) {
  for (const auto& c : scheme_table)
    if (c.weight_key == k && c.scales) return c.id;
  return method::none;
}

/// The member of a backend's FP8 kernel families that runs FP8 formula tag Formula: a weight formula
/// runs the weight kernel of the scheme whose weight key it is, an activation formula the activation
/// kernel of its key. Naming a member does not instantiate it.
template <template <class> class WeightKernel, template <class> class ActivationKernel, class Formula>
using fp8_kernel_of = std::conditional_t<formula_of(Formula::id).weight,
                                         WeightKernel<method_tag<fp8_weight_method_of(*formula_of(Formula::id).key)>>,
                                         ActivationKernel<key_tag<*formula_of(Formula::id).key>>>;

// ---- scale shapes ----

/// The logical shape of the scales a group shape gives an [rows, cols] tensor, from the key's group
/// shape alone: one scale per group, a group spanning all rows/columns where the shape says -1.
/// Per tensor [1, 1]; per token [rows, 1]; blocks and groups [ceil(rows/r), ceil(cols/c)]. Per
/// channel is GroupShape(-1, 1) over vLLM's [K, N] view of a weight, which over the [N, K] weights
/// here is one scale per row: [rows, 1].
constexpr std::array<std::int64_t, 2> scale_grid(group_shape g, std::int64_t rows, std::int64_t cols) {
  if (g == per_channel) return {rows, 1};
  const std::int64_t r = g.row < 0 ? 1 : (rows + g.row - 1) / g.row;
  const std::int64_t c = g.col < 0 ? 1 : (cols + g.col - 1) / g.col;
  return {r, c};
}
/// The scale grid of quant key k's group shape.
constexpr std::array<std::int64_t, 2> scale_grid(key_id k, std::int64_t rows, std::int64_t cols) {
  return scale_grid(key_of(k).scale.group, rows, cols);
}
// ---- the pairing rule of the FP8 GEMMs (spec §10), once ----

/// What breaks the pairing of a GEMM's weight scales, activation scales and K.
enum class pairing : std::uint8_t { ok, k_not_positive, blocks_need_groups, groups_need_blocks, k_not_block_multiple };

/// The width of a 128x128 weight block along K: 1x128 activation groups must tile it exactly.
inline constexpr std::int64_t block_k = 128;

/// 128x128 weight blocks go with 1x128 activation groups and only with them, and then K is a
/// multiple of 128; per-tensor and per-channel weights take per-tensor or per-token activations.
constexpr pairing check_pairing(weight_scales w, activation_quant a, std::int64_t k) {
  if (k <= 0) return pairing::k_not_positive;
  const bool blocks = w == weight_scales::block_128x128, groups = a == activation_quant::group_128;
  if (blocks && !groups) return pairing::blocks_need_groups;
  if (groups && !blocks) return pairing::groups_need_blocks;
  if (blocks && k % block_k != 0) return pairing::k_not_block_multiple;
  return pairing::ok;
}

/// The broken pairing as a sentence, empty when it holds.
inline std::string pairing_sentence(weight_scales w, activation_quant a, std::int64_t k) {
  switch (check_pairing(w, a, k)) {
    case pairing::ok: return {};
    case pairing::k_not_positive: return "K (the input features) must be positive, got " + std::to_string(k);
    case pairing::blocks_need_groups:
      return "128x128 weight blocks need 1x128 activation groups, not " + std::string(fp8::name_of(a)) + " activations";
    case pairing::groups_need_blocks:
      return "1x128 activation groups need 128x128 weight blocks (the block-scaled GEMM); these weights are " +
             std::string(fp8::name_of(w));
    case pairing::k_not_block_multiple:
      return "128x128 weight blocks need K (the input features) to be a multiple of 128 (1x128 activation groups), got " +
             std::to_string(k);
  }
  return {};
}

}  // namespace qpolicy::schemes

namespace qpolicy {

/// A weight-only layer's activation treatment as a type (the activation parameter of its layer types,
/// as an activation key tag is for the scaled FP8 layers).
template <schemes::activation_treatment T>
struct treatment_tag {
  static constexpr schemes::activation_treatment id = T;
};

template <class T>
inline constexpr bool is_treatment_tag = false;
template <schemes::activation_treatment T>
inline constexpr bool is_treatment_tag<treatment_tag<T>> = true;

}  // namespace qpolicy
