// libFuzzer target over an already-quantized checkpoint as `plan --model-dir` reads it: a
// quantization_config (read_checkpoint_source), the tensors' headers (layers derived from their names,
// the stored tensors checked against the method's format), and the composition with an online config.
// Input: one flag byte (bit 0: model_type gpt_oss; bits 1-3: the release), the quantization_config's JSON
// text up to the first newline, then one tensor a line, "NAME\tT D...", T the dtype (a byte, modulo the
// dtypes) and each dimension one byte (0xFF: 2^40). Anything but success or config_error is a finding.
#include <boost/json.hpp>

#include <map>

#include "fuzz_target.hpp"
#include "qpolicy/io/checkpoint.hpp"
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/plan/composed_plan.hpp"
#include "qpolicy/source/checkpoint_source.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto newline = text.find('\n');
  boost::system::error_code ec;
  const auto qc = boost::json::parse(text.substr(0, newline), ec);
  if (ec) return 0;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensors;
  std::map<std::string, qpolicy::source::tensor_header> headers;
  for (std::size_t at = newline == std::string_view::npos ? text.size() : newline + 1; at < text.size();) {
    auto end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const auto line = text.substr(at, end - at);
    at = end + 1;
    const auto tab = line.find('\t');
    if (tab == std::string_view::npos || tab + 1 >= line.size()) continue;
    const auto type = static_cast<qpolicy::safetensors::dtype>(static_cast<unsigned char>(line[tab + 1]) % 15);
    std::vector<std::int64_t> shape;
    for (unsigned char d : line.substr(tab + 2)) shape.push_back(d == 0xFF ? std::int64_t{1} << 40 : d);
    const std::string name(line.substr(0, tab));
    tensors.emplace_back(name, shape);
    headers[name] = {type, shape};
  }
  try {
    const auto source = qpolicy::source::read_checkpoint_source(qc, (data[0] & 1) ? "gpt_oss" : "llama");
    const auto model = qpolicy::derive_model(qpolicy::source::weight_names_of(tensors, source), nullptr);
    qpolicy::source::check_stored_tensors(source, model, [&](const std::string& name) -> const qpolicy::source::tensor_header* {
      const auto it = headers.find(name);
      return it == headers.end() ? nullptr : &it->second;
    });
    qpolicy::config_request r;
    r.config_text = std::string(R"({"linear": "fp8_per_block", "moe": "mxfp4"})");
    r.release = static_cast<qpolicy::vllm_release>(((data[0] >> 1) & 7) % 5);
    const auto p = qpolicy::compose(qpolicy::make_plan(qpolicy::resolve(r).config, model), model, source);
    (void)qpolicy::composed_plan_to_json(p, model);
    (void)qpolicy::composed_plan_to_table(p, model);
  } catch (const qpolicy::config_error&) {
  }
  return 0;
}

std::vector<std::string> qpolicy::fuzz::seeds() {
  const std::string llama = "model.layers.0.self_attn.q_proj.weight\t\x0d\x08\x10\nmodel.layers.0.self_attn.k_proj.weight\t\x0d\x04\x10\n"
                            "model.layers.0.self_attn.v_proj.weight\t\x0d\x04\x10\nmodel.layers.0.self_attn.q_proj.weight_scale_inv\t\x09\x01\x01\n"
                            "model.layers.0.mlp.experts.0.gate_proj.weight_packed\t\x01\x08\x08\nlm_head.weight\t\x06\x20\x10\n";
  return {
      std::string(1, '\x08') + R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]})" + "\n" + llama,
      std::string(1, '\x02') + R"({"quant_method": "fp8", "activation_scheme": "dynamic", "ignored_layers": ["model.layers.0.self_attn.q_proj"]})" +
          "\n" + llama,
      std::string(1, '\x08') + R"({"quant_method": "compressed-tensors", "ignore": ["re:.*gate$"], "config_groups": {"g": {"targets":
        ["Linear"], "format": "nvfp4-pack-quantized", "weights": {"type": "float", "num_bits": 4, "strategy": "tensor_group",
        "group_size": 16}}}, "transform_config": {"config_groups": {"v": {}}}})" + "\n" + llama,
      std::string(1, '\x09') + R"({"quant_method": "mxfp4"})" + "\n" +
          "model.layers.0.mlp.experts.gate_up_proj_blocks\t\x01\x04\x08\x02\x10\nmodel.layers.0.mlp.experts.gate_up_proj_scales\t\x01\x04\x08\x02\n"
          "model.layers.0.mlp.experts.down_proj_blocks\t\x01\x04\xff\x01\x10\n",
      std::string(1, '\x06') + R"({"quant_method": "modelopt", "quantization": {"quant_algo": "nvfp4", "exclude_modules": ["*q_proj*", "lm_head"]}})" +
          "\n" + llama,
      std::string(1, '\x00') + R"({"quant_method": "modelopt", "quant_algo": 7})" + "\n",
      std::string(1, '\x00') + R"(["not", "an", "object"])" + "\n",
      // Found by this target: a name that is not UTF-8 broke the composed plan's JSON (it was re-parsed).
      std::string("\x08""{\x22""quant_method\x22"": \x22""compressed-tensors\x22"", \x22""ignore\x22"": [\x22""re:.*gate$\x22""], \x22""conffig\x22"": {\x22""config_groups\x22"": {\x22""v\x22"": {}}}}\x0a""model.layers.0.self_attn.q_proj.weight\x09""\x0d""\x08""\x10""\x0a""model.layers.0.self_attn.k_proj.weight\x09""\x0d""\x04""\x10""\x0a""model.l\x9e""\x86""\x9a""\x8d""s.0.self_attn.v_proj.weight\x09""\x0d""\x04""\x10""\x0a""model.layers.1.self_attn.q_proj.weight_scale_inv\x09""\x09""\x01""\x01""\x0a""model.layers.0.mlp.experts.0.gate_proj.weight_packed\x09""\x01""\x08""\x08""\x0a""lm_head.weight\x09""\x06"" \x10""\x0a""", 365),
      // Found by this target: gpt-oss blocks claiming 2^40 experts were expanded expert by expert.
      std::string("\x09""{\x22""quant_method\x22"": \x22""mxfp4\x22""}\x0a""modemodel.layersdel.lts.gate_up_proj_blocks\x09""\x01""\x04""\x08""\x02""\x10""\x0a""model.layers.0.mlp.experts.gate_up_proj_sc\x22"": {\x22""v\x22"": {}}}}\x0a""model.layers.z0.self_attn.q_proj.weight\x09""\x0d""\x08""\x10""\x0a""model.lay\x3f""ers.0.self_atg\x00""tn.k_proj.weight\x09""\x0d""\x04""\x10""\x0a""model.l\x9e""\x86""\x9a""\x8d""s.0.self_attn.v_proj.weight\x09""\x0d""\x04""\x10""\x0a""model.layers.0.selp.experts.gate_up_proj_sc\x22"":inv\x09""\x09""\x01""\x01""\x0a""m\xff""\xff""\xff""\xac""\x09""\x01""4\x00""\x11""\x00""model.layersdel.layers.0.mocks\x04""\x08""\x02""\x0a""model.layers.0.0.mlp.exper.down_proj_blocks\x09""\x01""\xff""\x04""\x01""\x10""\x0a""", 415),
  };
}
