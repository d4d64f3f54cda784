// libFuzzer target over `quantize` end to end: one flag byte (bit 0: --config-out, bits 1-2: the
// scheme, bit 3: legacy schema with an ignore list), then a safetensors file. It is quantized into a
// private directory; the input must come out unchanged and a refusal must leave nothing behind
// (quantize_run.hpp). Anything but success or config_error is a finding.
#include "fuzz_target.hpp"
#include "quantize_run.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  using namespace qpolicy::fuzz;
  put(run_dir() / "in.safetensors", {reinterpret_cast<const char*>(data + 1), size - 1});
  static const char* const schemes[] = {"fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "mxfp4"};
  qpolicy::config_request r;
  r.quantization = schemes[(data[0] >> 1) & 3];
  if (data[0] & 8) {
    r.legacy = true;
    r.quantization = "online";
    r.config_text = std::string(R"({"global_scheme": ")") + schemes[(data[0] >> 1) & 3] + R"(", "ignore": ["lm_head"]})";
  }
  qpolicy::checkpoint_request req;
  req.inputs = {(run_dir() / "in.safetensors").string()};
  req.output = (run_dir() / "out.safetensors").string();
  if (data[0] & 1) req.config_out = (run_dir() / "quant_config.json").string();
  req.threads = 1;
  try {
    req.config = qpolicy::resolve(r).config;
  } catch (const qpolicy::config_error&) {
    return 0;
  }
  quantize_and_check(req, {"in.safetensors"});
  return 0;
}

std::vector<std::string> qpolicy::fuzz::seeds() {
  const std::string w(2 * 4 * 16 * 2, '\x3c');
  const std::string experts = R"("m.layers.0.mlp.experts.0.gate_proj.weight": {"dtype": "BF16", "shape": [4, 16], "data_offsets": [0, 128]},
      "m.layers.0.mlp.experts.0.up_proj.weight": {"dtype": "BF16", "shape": [4, 16], "data_offsets": [128, 256]},
      "m.layers.0.mlp.experts.0.down_proj.weight": {"dtype": "BF16", "shape": [16, 4], "data_offsets": [256, 384]})";
  std::vector<std::string> out;
  for (char flags : {'\x00', '\x01', '\x02', '\x05', '\x06', '\x09'}) {
    out.push_back(flags + safetensors_bytes(R"({"m.layers.0.self_attn.q_proj.weight": {"dtype": "BF16", "shape": [4, 16], "data_offsets": [0, 128]},
      "m.layers.0.self_attn.k_proj.weight": {"dtype": "BF16", "shape": [4, 16], "data_offsets": [128, 256]},
      "m.layers.0.self_attn.v_proj.weight": {"dtype": "BF16", "shape": [4, 16], "data_offsets": [256, 384]},
      "lm_head.weight": {"dtype": "F16", "shape": [1, 4], "data_offsets": [384, 392]}})", std::string(392, '\x3c')));
    out.push_back(flags + safetensors_bytes("{" + experts + "}", std::string(384, '\x3b')));
  }
  // Crash inputs of the issue: a planned weight of [2^63 - 1, 0] and [2^40, 0], an odd data offset.
  out.push_back('\x00' + safetensors_bytes(R"({"x.weight": {"dtype": "BF16", "shape": [9223372036854775807, 0], "data_offsets": [0, 0]}})", ""));
  out.push_back('\x04' + safetensors_bytes(R"({"x.weight": {"dtype": "BF16", "shape": [1099511627776, 0], "data_offsets": [0, 0]}})", ""));
  out.push_back('\x02' + safetensors_bytes(R"({"b": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
      "x.weight": {"dtype": "BF16", "shape": [2, 4], "data_offsets": [1, 17]}})", std::string(17, '\x3d')));
  return out;
}
