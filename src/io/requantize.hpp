#pragma once
// Internal to `quantize`: an already-quantized model directory as a conversion's input. What each layer
// the checkpoint quantizes stores (its format's tensors, and the decoder that reads them back), the
// decode a requantized layer starts from, and how kept layers are carried into the output's
// compressed-tensors quantization_config (their tensors copied byte for byte, renamed only where the
// format names them otherwise, their config groups kept).
#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "checkpoint_files.hpp"
#include "chunk_io.hpp"
#include "qpolicy/io/checkpoint.hpp"
#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/plan/composed_plan.hpp"
#include "qpolicy/schemes/formulas.hpp"
#include "qpolicy/source/checkpoint_source.hpp"

namespace qpolicy::checkpoint_io {

/// A model directory's own quantization, as quantize reads it.
struct quantized_input {
  source::checkpoint_source source;
  boost::json::object config;      // config.json's quantization_config, as written
  element dtype = element::bf16;   // the model dtype decoded weights take (config.json's dtype or torch_dtype)
  std::string dtype_source;        // where dtype came from, in words
};

/// How the checkpoint stores one module's weight, and the decoder row that reads it back.
struct stored_weight {
  std::string module;  // M: the tensors are M.<suffix>
  std::string format;  // the checkpoint's format, in words
  schemes::formula formula = schemes::formula::fp8_per_tensor_static;
  std::string codes, scales, second;  // tensor names; second "" for none
  bool invert_second = false;  // compressed-tensors stores NVFP4's encode scale: the decoder's multiplier is 1/x
  bool int8_words = false;     // pack-quantized: four codes + 128 to a little-endian int32
  bool decoded_by_vllm = false;  // the release's own dequantize_weight reads this format (else a qpolicy extension)
  std::int64_t rows = 0, cols = 0;
};

/// The stored weight of module `module` of `layer`, which the checkpoint quantizes as `decided`. Throws
/// config_error naming the module and its format when no decoder reads it.
stored_weight stored_weight_of(const checkpoint& ck, const quantized_input& in, const source::source_layer& decided,
                               const std::string& module, const std::string& layer);

/// A stored tensor's bytes, read with pread into `into` (grown as needed): like every other read, so
/// the mapped pages are never faulted in (which costs more than the copy and adds the whole input to
/// the resident set).
std::span<const std::byte> read_tensor(const tensor_ref& t, std::vector<std::uint32_t>& into);

/// Decodes `w` into `out` as [rows, cols] of `out_type` (cpu::dequantize: code x scales in float32,
/// rounded once; NVFP4 in vLLM's dequantize_to_dtype order). Its codes are read through the stream's
/// `buffers` (a read ahead of them taken).
void decode_weight(const checkpoint& ck, const stored_weight& w, read_buffers& buffers, element out_type, std::vector<std::uint32_t>& out,
                   unsigned threads);

/// The input tensors a requantized module's new weight replaces: its stored weight's tensors and its
/// static activation scales (the online method quantizes activations its own way).
std::vector<std::string> replaced_tensors(const checkpoint& ck, const stored_weight& w);

/// How the output keeps the checkpoint's kept layers.
struct kept_layers {
  std::map<std::string, std::string> renamed;  // input tensor -> output name
  /// The config groups that describe the kept modules (compressed-tensors' own groups with their targets
  /// narrowed to the kept modules; one group for another method), by name, in the checkpoint's order.
  std::vector<std::pair<std::string, boost::json::object>> groups;
  std::vector<std::string> notes;  // where tensors are re-expressed, and why
  /// The output format that holds them: compressed-tensors, Quark for gpt-oss's fused MXFP4 experts (then
  /// `groups` maps each kept layer to its Quark spec), or ModelOpt's MIXED_PRECISION for ModelOpt NVFP4
  /// (then `groups` maps each kept module to its quantized_layers entry).
  checkpoint_format format = checkpoint_format::compressed_tensors;
};

/// The kept layers of `p` carried into the output: a compressed-tensors checkpoint, or, unless `requested`
/// is compressed-tensors, a Quark one for gpt-oss's MXFP4 experts and a ModelOpt one for ModelOpt NVFP4. config_error naming the layer
/// for a format the output cannot hold byte for byte.
kept_layers keep_layers(const checkpoint& ck, const quantized_input& in, const model_desc& model, const composed_plan& p,
                        checkpoint_format requested);

/// The checkpoint module names of a layer, each expert's projections spelled out (the names its tensors
/// carry): a fused layer's shards, `L.E.P` for every expert E and projection P of `projections`, else
/// the layer's name.
std::vector<std::string> stored_modules(const model_desc& model, const layer_desc& layer, const std::array<std::string, 3>& projections);

}  // namespace qpolicy::checkpoint_io
