#pragma once
// Internal to `quantize`: the checkpoint formats a plan can be written in, derived from the scheme
// contracts -- which format can express which layers, the scale tensor's name, and the
// quantization_config block vLLM's and transformers' loaders read.
//   vllm-fp8: vLLM's `fp8` checkpoint method (Fp8Config.from_config reads quant_method,
//     activation_scheme, weight_block_size and ignored_layers, falling back to modules_to_not_convert,
//     the key transformers' FineGrainedFP8Config reads). One weight layout for the whole model, per
//     tensor or 128x128 blocks (`weight_scale_inv`), activations as vLLM's fp8 method picks them.
//   compressed-tensors: the formats llm-compressor writes (quant_method compressed-tensors,
//     config_groups of weights/input_activations arguments, ignore): `float-quantized` for every FP8
//     layout (`weight_scale` for each), and for the low-precision schemes `mxfp8-quantized`,
//     `mxfp4-pack-quantized`, `nvfp4-pack-quantized` and, for INT8 weight-only, `pack-quantized`
//     (vLLM's compressed-tensors loader runs weight-only INT weights only from that format).
#include <boost/json.hpp>

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qpolicy/io/checkpoint.hpp"
#include "qpolicy/io/safetensors.hpp"
#include "qpolicy/plan/plan.hpp"
#include "qpolicy/schemes/formulas.hpp"

namespace qpolicy::checkpoint_io {

/// The activation key a quantized layer runs with (nullopt: weight-only).
std::optional<key_id> activation_of(const layer_plan& l, layer_kind kind);

/// The format `requested` resolves to for plan `p`: automatic picks vllm-fp8 when every quantized layer
/// is 128x128 blocks (the one layout transformers' fp8 method loads), compressed-tensors otherwise.
/// config_error (exit 2) when the requested format cannot express a quantized layer, naming the
/// layer and the format that can; a warning when vllm-fp8 holds per-tensor weights, which vLLM loads
/// and transformers' fp8 method does not.
checkpoint_format choose_format(checkpoint_format requested, const model_desc& model, const plan& p,
                                std::vector<std::string>& warnings);

/// The name suffix of a weight's scale tensor, `P.weight_scale` or `P.weight_scale_inv`.
std::string_view scale_suffix(checkpoint_format f, method m);

/// How format `f` spells the shape of method `m`'s FP8 scale tensor (the bytes are the same): the key's
/// grid, per-channel [N] (Quark's and ModelOpt's ChannelQuantScaleParameter; compressed-tensors writes
/// [N, 1]), or ModelOpt's 4-D blocks [N/128, 1, K/128, 1].
enum class scale_spelling : std::uint8_t { grid, rows_1d, blocks_4d };
scale_spelling scale_spelling_of(checkpoint_format f, method m);

/// One tensor a low-precision weight `M.weight` is stored as: `M.<suffix>`, its element type and shape.
struct stored_tensor {
  std::string_view suffix;
  safetensors::dtype type;
  std::vector<std::int64_t> shape;
};

/// The tensors compressed-tensors stores formula `f`'s [rows, cols] weight of element type `d` as, in
/// the order the writer writes them: the codes, the block or row scales, then the NVFP4 global scale
/// or the packed INT weight's shape.
std::vector<stored_tensor> low_precision_tensors(schemes::formula f, safetensors::dtype d, std::int64_t rows, std::int64_t cols);

/// The quantization_config object for the model's config.json, from the plan alone. `f` is a chosen
/// format (not automatic).
boost::json::object quantization_config(checkpoint_format f, const model_desc& model, const plan& p);

/// compressed-tensors' quantization_config for a conversion of an already-quantized checkpoint: the
/// kept layers' groups (`kept`, in order), then one group per scheme of the layers the online plan
/// quantizes (named `group_N`, or `online_group_N` where the checkpoint has that name), every group
/// naming its modules; `ignore` lists the modules `unquantized(i)` leaves in high precision; the
/// checkpoint's kv_cache_scheme carried over, and its transform_config (else the online plan's).
boost::json::object mixed_quantization_config(const model_desc& model, const plan& online,
                                              const std::vector<std::pair<std::string, boost::json::object>>& kept,
                                              const std::function<bool(std::size_t)>& unquantized,
                                              const boost::json::object& checkpoint_config);

/// Whether Quark's FP8 specs express method `m` with `activation` (vLLM's _is_fp8_w8a8): FP8 weights per
/// tensor, per channel or in 128x128 blocks, with dynamic FP8 activations per tensor, per token or (beside
/// blocks) in 1x128 groups, or none.
bool quark_expresses(method m, std::optional<key_id> activation);

/// Quark's spec of gpt-oss's kept experts: MXFP4 weights (fp4, per_group 32, e8m0 scales), bf16
/// activations, which vLLM's QuarkOCP_MX_MoEMethod runs and GptOssModel._load_weights_quark loads from
/// the fused `*_blocks`/`*_scales` tensors as stored.
boost::json::object quark_mxfp4_experts_config();

/// Quark's quantization_config for a conversion that keeps gpt-oss's MXFP4 experts: `kept` (module ->
/// spec) and every module the online plan quantizes in `layer_quant_config` by name, the modules
/// `unquantized(i)` leaves in high precision in `exclude`, and a global config without a weight spec
/// (a module named nowhere fails to load rather than load wrongly). quark_expresses holds for every
/// online layer (choose_format checks it).
boost::json::object quark_quantization_config(const model_desc& model, const plan& online,
                                              const std::vector<std::pair<std::string, boost::json::object>>& kept,
                                              const std::function<bool(std::size_t)>& unquantized);

/// The ModelOpt algo an online layer of `kind` quantized by `m` with `activation` is written as in a
/// MIXED_PRECISION checkpoint (linear layers: fp8_per_channel as FP8_PER_CHANNEL_PER_TOKEN, fp8_per_block
/// as FP8_PB_WO, mxfp8 as MXFP8, each with its default activation), or nullopt.
std::optional<std::string_view> modelopt_algo(method m, layer_kind kind, std::optional<key_id> activation);
/// Those pairs in words, for messages.
std::string modelopt_algos_text();

/// The quantized_layers entry of a kept ModelOpt NVFP4 module: NVFP4 in blocks of `group_size`, as its stored
/// tensors are.
boost::json::object modelopt_nvfp4_entry(std::int64_t group_size);

/// ModelOpt's MIXED_PRECISION quantization_config for a conversion that keeps ModelOpt NVFP4 layers:
/// `kept` (module -> entry) and every module the online plan quantizes (its modelopt_algo) in
/// `quantization.quantized_layers`, the modules `unquantized(i)` leaves in high precision in
/// `exclude_modules`, the checkpoint's kv-cache algo carried over. config_error when an excluded name is
/// contained in a quantized module's (vLLM would exclude that one too).
boost::json::object modelopt_mixed_quantization_config(const model_desc& model, const plan& online,
                                                       const std::vector<std::pair<std::string, boost::json::object>>& kept,
                                                       const std::function<bool(std::size_t)>& unquantized,
                                                       const boost::json::object& checkpoint_config);

/// One input rotation of a checkpoint, as compressed-tensors' transform_config holds it (llm-compressor's
/// QuIPModifier with rotations ["v"], transform_type "hadamard"): a Hadamard size, the modules it rotates
/// (a fused layer as its shards) in the order transformers registers them, and whether they are every
/// quantized module (then it targets "Linear" less the ignored modules, as llm-compressor writes it).
struct rotation_group {
  std::string scheme;  // the transform scheme's name: "v", or "v<size>" when sizes differ
  std::int64_t size = 0;
  std::vector<std::string> modules;
  bool every_quantized = false;
};

/// The rotations of the layers plan `p` quantizes with a Hadamard size: one group per size, in module
/// order; empty when none is rotated.
std::vector<rotation_group> rotation_groups(const model_desc& model, const plan& p);

/// The one tensor a group's transform weight is saved as (the ±1 Sylvester matrix; vLLM divides it by
/// sqrt(size) when loading, and every module of the scheme shares it): `{first module}.{scheme}_input.weight`,
/// where transformers' save_pretrained keeps the first of the tied transform weights.
std::string transform_tensor_name(const rotation_group& g);

/// compressed-tensors' transform_config for plan `p`: one hadamard scheme per group, rotating the
/// modules' input online and their weights offline (weight_input, inverse); {} when none is rotated.
boost::json::object transform_config(const model_desc& model, const plan& p);

/// compressed-tensors' QuantizationArgs of an FP8 tensor (float32 scales, symmetric): `strategy` tensor,
/// channel, token, group (with `group_size`) or block (with `block`).
boost::json::object fp8_quant_args(std::string_view strategy, bool dynamic, std::optional<std::int64_t> group_size = std::nullopt,
                                   std::optional<std::array<std::int64_t, 2>> block = std::nullopt);

/// The checkpoint module names of a layer: a fused layer's shards, a MoE layer's expert projections
/// (as one `re:` pattern, or the layer's own name), else the layer's name.
std::vector<std::string> layer_module_names(const model_desc& model, const layer_desc& layer, bool moe_as_pattern);

/// The module names of the layers `unquantized(i)` says stay in high precision that a loader could
/// otherwise take for quantized ones (as unquantized_modules).
std::vector<std::string> unquantized_modules_if(const model_desc& model, const std::function<bool(std::size_t)>& unquantized,
                                                bool moe_as_pattern);

/// The Hugging Face module names a plan leaves in high precision that a loader could otherwise take
/// for quantized ones: linear layers (a fused layer as its shards) and the LM head; MoE layers by
/// name (`moe_as_pattern`: as a `re:` pattern over their experts' projections).
std::vector<std::string> unquantized_modules(const model_desc& model, const plan& p, bool moe_as_pattern);

}  // namespace qpolicy::checkpoint_io
