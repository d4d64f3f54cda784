#pragma once
// What an already-quantized checkpoint holds, and what vLLM's checkpoint method does with each layer:
// the stage before a plan when the model comes from a model directory with its own
// `quantization_config` (online-quant-config.md §9.3). The rules are vLLM's, read in 0.30-0.34 (the
// same in every one of them):
//   fp8.py             Fp8Config: `ignored_layers`, else `modules_to_not_convert`, exact names through
//                      is_layer_skipped (fused shards agree; experts by containment); `weight_block_size`;
//   compressed_tensors CompressedTensorsConfig: `ignore` (should_ignore_layer), then the config groups'
//                      targets in order (find_matched_target: the name, the fused shards all, the class
//                      name contained; "Linear" also targets the experts), weight arguments or none;
//   mxfp4.py           Mxfp4Config / GptOssMxfp4Config: the experts only (linear layers stay unquantized);
//   modelopt.py        ModelOptFp8Config / ModelOptNvFp4Config: `exclude_modules` (or `ignore`) as exact
//                      names, substrings and fnmatch wildcards; ModelOptMixedPrecisionConfig (quant_algo
//                      MIXED_PRECISION): the same exclusions, then each layer's algo from `quantized_layers`
//                      (_resolve_quant_algo: the name, its fused shards, or a key under its prefix);
//   quark/quark.py     QuarkConfig: `exclude` (should_ignore_layer; experts by their children too), then
//                      `layer_quant_config` (containment without `*`, else fnmatch; fused shards agree), else
//                      `global_quant_config`; the scheme from the weight and input specs (_is_fp8_w8a8,
//                      _is_w_ocp_mx_a_x, ...).
#include <boost/json/fwd.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qpolicy/io/safetensors.hpp"
#include "qpolicy/keys/release.hpp"
#include "qpolicy/model/model.hpp"

namespace qpolicy::source {

/// The checkpoint methods qpolicy reads, by the name vLLM gives each after its override step
/// (config/model.py _verify_quantization): one row each in method_table.
enum class checkpoint_method : std::uint8_t { fp8, compressed_tensors, mxfp4, gpt_oss_mxfp4, modelopt_fp8, modelopt_fp4, modelopt_mixed, quark };

/// vLLM's quantization method class for a layer of a checkpoint method: one row each in class_table,
/// with whether (and from which release) vLLM can decode its weights for requantization.
enum class method_class : std::uint8_t {
  unquantized_linear,
  unquantized_moe,
  fp8_linear,
  fp8_moe,
  mxfp4_moe,
  ct_linear,
  ct_moe_w8a8_fp8,
  ct_moe_w8a8_mxfp8,
  ct_moe_w4a4_mxfp4,
  ct_moe_w4a4_nvfp4,
  ct_moe_wna16,
  modelopt_linear,
  modelopt_fp8_moe,
  modelopt_nvfp4_moe,
  modelopt_mxfp8_moe,
  quark_linear,
  quark_fp8_moe,
  quark_ocp_mx_moe,
};

/// How a class answers vLLM's dequantize_weight (base_config.py and the classes that override it).
enum class decode_support : std::uint8_t {
  none,           // the base method: "does not implement dequantize_weight"
  decodes,        // decodes its weights (from `since`)
  mxfp8_only,     // ModelOptLinearMethod and QuarkLinearMethod: MXFP8 weights only (class_row::partial_text otherwise)
};

/// How a layer's weight is stored, where the checkpoint's config names it per layer (ModelOpt
/// MIXED_PRECISION, Quark): the tensors beside `M.weight`, which the stored-tensor checks read and the
/// decoders take.
enum class stored_layout : std::uint8_t {
  unknown,        // a layout this build does not check or decode
  fp8_tensor,     // weight F8_E4M3 [N, K], weight_scale F32 [1] or []
  fp8_channel,    // weight F8_E4M3 [N, K], weight_scale F32 [N] (or [N, 1])
  fp8_blocks,     // weight F8_E4M3 [N, K], weight_scale F32 [N/128, K/128] (rounded up; Quark)
  fp8_blocks_4d,  // weight F8_E4M3 [N, K], weight_scale F32 [N/128, 1, K/128, 1] (ModelOpt FP8_PB_WO)
  mxfp8,          // weight F8_E4M3 [N, K], weight_scale U8 [N, K/32]
  mxfp4,          // weight U8 [N, K/2], weight_scale U8 [N, K/32]; gpt-oss's experts as fused *_blocks/*_scales
  nvfp4,          // weight U8 [N, K/2], weight_scale F8_E4M3 [N, K/group_size], weight_scale_2 F32 [1] or []
};

/// One vLLM method class: its qualified name (as Python prints `type(self)`), what it decodes and since
/// which release.
struct class_row {
  method_class id;
  std::string_view qualified_name;
  decode_support decode = decode_support::none;
  vllm_release since = vllm_release::v0_30;
  std::string_view partial_text = "";  // mxfp8_only: vLLM's error for any other weight
};

/// The row of class `c`.
const class_row& class_of(method_class c);

/// One checkpoint method: vLLM's name, the `quant_method` values that select it, what it quantizes.
struct method_row {
  checkpoint_method id;
  std::string_view vllm_name;
  std::string_view quantizes;  // in words, for the plan
};

/// The row of method `m`.
const method_row& method_of(checkpoint_method m);

/// What the checkpoint's method does with one layer.
struct source_layer {
  method_class cls = method_class::unquantized_linear;
  std::string scheme;  // what the checkpoint stores for the layer, in words ("" when unquantized)
  std::string rule;    // which entry of the checkpoint's quantization_config decided, in words
  std::optional<std::string> error;  // vLLM's error when it builds the layer (shards that disagree, ...)
  stored_layout layout = stored_layout::unknown;  // ModelOpt MIXED_PRECISION and Quark: how the weight is stored
  std::string entry = {};  // ModelOpt MIXED_PRECISION and Quark: the config entry that decided ("" for Quark's global config)
  bool quantized() const { return cls != method_class::unquantized_linear && cls != method_class::unquantized_moe; }
};

/// A compressed-tensors config group, as the layer rules read it.
struct config_group {
  std::string name;
  std::vector<std::string> targets;
  std::string format;    // the group's, else the config's
  bool has_weights = false;
  std::string weight_type;  // "float" or "int"
  int num_bits = 0;
  std::string strategy;  // tensor, channel, group, block, tensor_group, ...
  std::optional<std::int64_t> group_size;
  std::string scale_dtype;  // "" for null
  bool symmetric = true;    // false: the weights have zero points
  std::optional<std::array<std::int64_t, 2>> block_structure;  // strategy block
  bool has_input_activations = false;
  bool input_dynamic = false;
  int input_bits = 0;
  std::string input_type;
};

/// One Quark layer config (a `layer_quant_config` entry or `global_quant_config`), read: what vLLM builds
/// from it for a linear layer and for the experts (QuarkConfig._get_scheme_cls_from_config,
/// QuarkMoEMethod.get_moe_method_target), or its error.
struct quark_layer_config {
  std::string pattern;    // the layer_quant_config key ("" for the global config)
  std::string canonical;  // the config as sorted JSON: equal configs compare equal (vLLM's deep_compare)
  struct target {
    method_class cls = method_class::unquantized_linear;
    std::string scheme;  // in words
    stored_layout layout = stored_layout::unknown;
    std::optional<std::string> error;
  };
  target linear, moe;
};

/// A checkpoint's quantization_config, read: the method and the fields its layer rules use.
struct checkpoint_source {
  checkpoint_method method = checkpoint_method::fp8;
  std::string quant_method;              // as config.json writes it
  std::vector<std::string> skipped;      // fp8's ignored layers, compressed-tensors' ignore, ModelOpt's exclusions
  std::string skipped_key;               // the key they came from
  std::optional<std::array<std::int64_t, 2>> weight_block_size;  // fp8
  std::string store_dtype;                // fp8: "mxfp4" stores the experts as MXFP4
  std::vector<config_group> groups;       // compressed-tensors, in the config's order
  std::string quant_algo;                 // ModelOpt, upper-cased
  std::int64_t group_size = 16;           // ModelOpt NVFP4: weights per scale (`group_size`, vLLM's default 16)
  /// ModelOpt MIXED_PRECISION's `quantized_layers`: module -> its quant_algo (upper-cased), in the config's order.
  std::vector<std::pair<std::string, std::string>> quantized_layers;
  std::vector<quark_layer_config> quark_layers;  // Quark's layer_quant_config, in the config's order
  quark_layer_config quark_global;               // Quark's global_quant_config
  bool has_transform_config = false;      // compressed-tensors: online rotations wrap some layers
  std::vector<std::string> transform_schemes;  // their scheme names: `M.{scheme}_{location}.weight` is a transform's
  /// The checkpoint's names of an expert's projections (vLLM's ckpt_gate/up/down_proj_name), which
  /// compressed-tensors' rules match for the experts: gate_proj/up_proj/down_proj, or w1/w3/w2.
  std::array<std::string, 3> expert_projections{"gate_proj", "up_proj", "down_proj"};

  /// What vLLM's method does with layer `layer` of `model`.
  source_layer decide(const model_desc& model, const layer_desc& layer) const;
  /// The checkpoint in words: method and the entries its rules read.
  std::string describe() const;
};

/// Reads config.json's `quantization_config` (`model_type` from config.json: gpt-oss's MXFP4 is its own
/// method). Throws config_error naming the value for an unknown `quant_method` (and the methods this
/// build reads), a missing or ill-typed field vLLM requires, and a ModelOpt quant_algo other than FP8
/// and NVFP4 (or MIXED_PRECISION); Quark and MIXED_PRECISION configs are checked entry by entry.
checkpoint_source read_checkpoint_source(const boost::json::value& quantization_config, std::string_view model_type);

/// The compressed-tensors config group that decided a layer (its rule names it); nullptr for another
/// method or an unquantized layer.
const config_group* decided_group(const checkpoint_source& checkpoint, const source_layer& decided);

/// A tensor of a checkpoint, as its header describes it.
struct tensor_header {
  safetensors::dtype type;
  std::vector<std::int64_t> shape;
  std::string file;  // the file that holds it, for messages ("" when unknown)
};

/// Checks that the checkpoint stores every module of every layer its method quantizes as the method's
/// format says (compressed-tensors' formats, vLLM's fp8 and ModelOpt layouts, gpt-oss's expert blocks):
/// each tensor there, with the format's dtype and a shape that agrees with the codes' [N, K]. Throws
/// config_error (exit 2) naming the first tensor that is missing, of another dtype or shape, and what the
/// format stores for the module. Formats whose layout this build does not know are not checked.
void check_stored_tensors(const checkpoint_source& checkpoint, const model_desc& model,
                          const std::function<const tensor_header*(const std::string&)>& find);

/// The (name, shape) list of a quantized checkpoint's tensors as derive_model takes a model's
/// weights: compressed-tensors' `M.weight_packed` as `M.weight`, gpt-oss's fused expert blocks
/// (`L.experts.gate_up_proj_blocks` [E, ...]) as each expert's gate/up/down weights; scales, other
/// companions and the transform weights of `checkpoint`'s transform_config left out.
std::vector<std::pair<std::string, std::vector<std::int64_t>>> weight_names_of(
    const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& tensors, const checkpoint_source& checkpoint);

}  // namespace qpolicy::source
