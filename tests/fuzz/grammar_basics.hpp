#pragma once
// The parts of checkpoint_grammar.hpp that the method grammars share: the choice stream, the drawn
// checkpoint, the methods and module layouts it draws, and damaged field values.
#include <boost/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "qpolicy/io/checkpoint.hpp"
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/io/safetensors.hpp"

namespace qpolicy::fuzz {

namespace json = boost::json;
using st = safetensors::dtype;

/// The choice stream: each pick reads one byte modulo the number of options (0 past the end).
struct choices {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t at = 0;
  unsigned pick(unsigned options) { return at < size ? data[at++] % options : 0; }
};

/// One tensor of the drawn checkpoint; `fill` is the byte its data repeats (weight_shape holds [N, K]).
struct stored_tensor {
  std::string name;
  st type = st::BF16;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> values;  // I64/I32 contents where they matter (weight_shape)
};

/// A drawn checkpoint and what runs on it.
struct checkpoint_draw {
  json::value quantization_config;
  std::vector<stored_tensor> tensors;
  std::string online;                 // the online quantization_config's text
  maybe<std::string> quantization;    // -q
  checkpoint_format format = checkpoint_format::automatic;
  std::string model_type, dtype;      // config.json's ("" leaves it out)
  std::uint8_t fill = 0;
  std::size_t truncate = 0;           // bytes cut from the file's end
  bool end_to_end = true;             // also run plan --model-dir and quantize on the directory
};

/// The methods the grammar draws, and one that no reader knows.
enum class method_draw : unsigned { fp8, compressed_tensors, mxfp4, modelopt_fp8, modelopt_nvfp4, unknown, quark, modelopt_mixed, count };

/// How one module is stored.
enum class layout : unsigned {
  natural,  // the method's own (from the config's method and format)
  bf16, fp8_tensor, fp8_block, ct_float, ct_nvfp4, ct_mxfp4, ct_mxfp8, ct_pack_int8, modelopt_fp8, modelopt_nvfp4,
  fp8_channel_rows,  // Quark's and ModelOpt's per-channel FP8: weight_scale [N]
  fp8_blocks_4d,     // ModelOpt's FP8_PB_WO: weight_scale [N/128, 1, K/128, 1]
  fp8_blocks_grid,   // Quark's 128x128 blocks: weight_scale [N/128, K/128]
  mxfp4_weight,      // Quark's MXFP4 linear: weight U8 [N, K/2], weight_scale U8 [N, K/32]
  count
};

/// The layouts a config gives linear modules and experts (gpt-oss's fused MXFP4 blocks for the experts of
/// an MXFP4 or a Quark MXFP4 checkpoint).
struct natural_layouts {
  layout linear = layout::bf16, experts = layout::bf16;
  bool fused_experts = false;
};

/// An integer field: `natural`, or a value some reader must refuse or take.
inline json::value int_field(choices& c, std::int64_t natural) {
  switch (c.pick(24)) {
    case 1: return 0;
    case 2: return -1;
    case 3: return 1;
    case 4: return 2;
    case 5: return 4;
    case 6: return 8;
    case 7: return 16;
    case 8: return 32;
    case 9: return 128;
    case 10: return -2;
    case 11: return INT64_MAX;
    case 12: return UINT64_MAX;
    case 13: return std::int64_t{1} << 40;
    case 14: return "16";
    case 15: return "x";
    case 16: return 16.5;
    case 17: return true;
    case 18: return nullptr;
    case 19: return json::array{16};
    case 20: return 1e300;
    case 21: return INT64_MIN;
    case 22: return 3;
    case 23: return "128x128";
    default: return natural;
  }
}

/// Sets `key` to `natural` (choice 0), leaves it out, or sets another value of `others`.
inline void field(choices& c, json::object& o, std::string_view key, json::value natural, std::initializer_list<json::value> others = {}) {
  const unsigned n = c.pick(static_cast<unsigned>(others.size()) + 3);
  if (n == 0) o[key] = std::move(natural);
  else if (n == 1) return;
  else if (n == 2) o[key] = nullptr;
  else o[key] = *(others.begin() + (n - 3));
}

/// A list of module names (an ignore list): empty, a real name or pattern, or a value of the wrong type.
inline json::value name_list(choices& c) {
  switch (c.pick(8)) {
    case 1: return json::array{"lm_head"};
    case 2: return json::array{"model.layers.0.self_attn.q_proj"};
    case 3: return json::array{"re:.*mlp.gate$", "re:.*self_attn.*"};
    case 4: return "lm_head";
    case 5: return json::array{5};
    case 6: return json::array{"*q_proj*", "model.layers.0.mlp.experts"};
    case 7: return json::array{"re:("};
    default: return json::array{"lm_head"};
  }
}

}  // namespace qpolicy::fuzz
