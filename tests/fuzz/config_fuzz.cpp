// libFuzzer target over config parse + resolve + plan. Input: one flag byte (bit 0 legacy, bits 1-3
// pick -q), then the quantization_config text. Any outcome but a crash, a sanitizer report or an
// exception other than config_error is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "qpolicy/io/json_front.hpp"

namespace {

const qpolicy::model_desc& fuzz_model() {
  static const qpolicy::model_desc model = qpolicy::parse_model(R"({
    "packed_modules_mapping": {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"], "x": []},
    "layers": [
      {"name": "model.layers.0.self_attn.qkv_proj", "class": "QKVParallelLinear", "kind": "linear", "shape": [384, 256]},
      {"name": "model.layers.0.self_attn.o_proj", "class": "RowParallelLinear", "kind": "linear", "shape": [256, 256]},
      {"name": "model.layers.0.mlp.gate", "class": "ReplicatedLinear", "kind": "linear", "quantizable": false},
      {"name": "model.layers.0.mlp.experts", "class": "FusedMoE", "kind": "moe", "num_experts": 8, "hidden_size": 256, "intermediate_size": 100},
      {"name": "model.layers.1.mlp.gate_up_proj", "class": "MergedColumnParallelLinear", "kind": "linear"},
      {"name": "qkv_proj.blocks.0.qkv_proj", "class": "QKVParallelLinear", "kind": "linear"},
      {"name": "model.layers.\u00e9.x", "class": "RowParallelLinear", "kind": "linear"},
      {"name": "lm_head", "class": "ParallelLMHead", "kind": "other"}]})");
  return model;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const char* const names[] = {nullptr, "online", "fp8_per_tensor", "fp8_per_block", "mxfp8", "int8_per_channel_weight_only", "gptq", ""};
  qpolicy::config_request r;
  r.legacy = data[0] & 1;
  if (const char* q = names[(data[0] >> 1) & 7]) r.quantization = q;
  r.config_text = std::string(reinterpret_cast<const char*>(data + 1), size - 1);
  r.dialect = (data[0] & 16) ? qpolicy::json_dialect::relaxed : qpolicy::json_dialect::strict;
  try {
    const auto res = qpolicy::resolve(r);
    (void)qpolicy::resolved_to_json(res.config);
    qpolicy::plan_options opts;
    opts.check_shapes = data[0] & 32;
    const auto p = qpolicy::make_plan(res.config, fuzz_model(), opts);
    (void)qpolicy::plan_to_json(p, fuzz_model());
  } catch (const qpolicy::config_error&) {
  }
  return 0;
}
