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
#include <string>
#include <string_view>
#include <type_traits>

#include "qpolicy/keys/quant_key.hpp"
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

/// One scheme: a method of the plan as the kernels, the checkpoint writer and the shape checks see it.
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
};

// Order: how messages list the schemes.
inline constexpr std::array<scheme_contract, 7> scheme_table{{
    {method::fp8_per_tensor, key_id::fp8_per_tensor_static, true, true, activation_path::dynamic,
     key_id::fp8_per_tensor_dynamic, key_id::fp8_per_tensor_dynamic, weight_scales::per_tensor, std::nullopt,
     "weight_scale", 16},
    // Per-channel MoE: w13's rows follow the per-token rule (the online path quantizes w13 as activations).
    {method::fp8_per_channel, key_id::fp8_per_channel_static, true, true, activation_path::dynamic, key_id::fp8_per_token,
     key_id::fp8_per_token, weight_scales::per_channel, key_id::fp8_per_token, "weight_scale", 16},
    {method::fp8_per_block, key_id::fp8_per_block_static, true, true, activation_path::dynamic,
     key_id::fp8_per_block_dynamic, key_id::fp8_per_block_dynamic, weight_scales::block_128x128, std::nullopt,
     "weight_scale_inv", 128},
    {method::mxfp8, key_id::mxfp8_static, true, true, activation_path::dynamic, key_id::mxfp8_dynamic,
     key_id::mxfp8_dynamic, std::nullopt, std::nullopt, "weight_scale", 32},
    {method::mxfp4, key_id::mxfp4_static, true, true, activation_path::dynamic, key_id::mxfp4_dynamic,
     key_id::mxfp4_dynamic, std::nullopt, std::nullopt, "weight_scale", 32},
    {method::int8_per_channel_weight_only, key_id::int8_per_channel_static, false, true, activation_path::weight_only,
     std::nullopt, std::nullopt, std::nullopt, std::nullopt, "weight_scale", 16},
    // Per-token NVFP4 activations have no quant key of their own in vLLM's vocabulary.
    {method::nvfp4_per_token, key_id::nvfp4, false, true, activation_path::dynamic, std::nullopt, std::nullopt,
     std::nullopt, std::nullopt, "weight_scale", 16},
}};

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

/// Whether this build has FP8 kernels for a method (its row has a weight-scale layout).
constexpr bool has_kernels(method m) { return has_contract(m) && contract_of(m).scales.has_value(); }

/// The low-precision formula of method m's weights (the schemes whose layers run the weight-only
/// GEMM), if it has one.
constexpr std::optional<formula> weight_formula_of(method m) {
  if (!has_contract(m)) return std::nullopt;
  const auto f = formula_of_key(contract_of(m).weight_key);
  if (f && formula_of(*f).low_precision()) return f;
  return std::nullopt;
}

/// A method's default activation key for a layer kind, if it has one.
constexpr std::optional<key_id> default_activation(method m, layer_kind kind) {
  if (!has_contract(m)) return std::nullopt;
  return kind == layer_kind::moe ? contract_of(m).moe_activation : contract_of(m).linear_activation;
}

/// The dispatch table (spec §3.6): the method a weight key selects for a layer kind, if any.
constexpr std::optional<method> dispatch_method(key_id weight, layer_kind kind) {
  for (const auto& c : scheme_table)
    if (c.weight_key == weight && (kind == layer_kind::linear ? c.linear : kind == layer_kind::moe && c.moe)) return c.id;
  return std::nullopt;
}

/// The sorted printed keys that `kind` supports, as the dispatch-miss message lists them.
constexpr std::string supported_weight_keys_repr(layer_kind kind) {
  std::array<std::string, key_count> printed{};
  std::size_t n = 0;
  for (const auto& e : key_table)
    if (dispatch_method(e.id, kind)) printed[n++] = to_string(e.key);
  for (std::size_t i = 1; i < n; ++i)  // insertion sort: constexpr and tiny
    for (std::size_t j = i; j > 0 && printed[j] < printed[j - 1]; --j) std::swap(printed[j], printed[j - 1]);
  return text::py_repr_list(std::span<const std::string>(printed.data(), n));
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


/// The methods with kernels, for messages: "fp8_per_tensor, fp8_per_channel and fp8_per_block".
constexpr std::string kernel_methods_text() {
  std::string out;
  std::size_t n = 0, total = 0;
  for (const auto& c : scheme_table) total += c.scales.has_value();
  for (const auto& c : scheme_table) {
    if (!c.scales) continue;
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
