// libFuzzer target over an already-quantized checkpoint's headers, as `plan --model-dir` and `quantize`
// read them before any tensor data: read_checkpoint_source, the layers derived from the tensor names,
// check_stored_tensors, and the composition with an online config (checkpoint_dir_fuzz.cpp writes the
// same checkpoints as directories and reads their data). One flag byte: bit 0 model_type gpt_oss; bits
// 1-3 the release; bit 7 picks the grammar.
// - Bit 7 clear (text): the quantization_config's JSON text up to the first newline, then one tensor a
//   line, "NAME\tT D...", T the dtype (a byte, modulo the dtypes) and each dimension one byte (0xFF: 2^40).
// - Bit 7 set (structured, checkpoint_grammar.hpp): the bytes after it are choices. They build a
//   quantization_config of every method the readers know (Quark and ModelOpt MIXED_PRECISION naming
//   each layer's scheme among them), each field drawn from values a reader must
//   refuse or take (0, -1, 2^63 - 1, strings, floats, lists of the wrong length, ...), and a model of
//   attention and dense or expert MLP layers stored in any method's layout, each tensor kept, dropped,
//   or given another dtype or shape.
// Anything but success or config_error is a finding.
#include <boost/json.hpp>

#include <map>

#include "checkpoint_grammar.hpp"
#include "fuzz_target.hpp"
#include "qpolicy/plan/composed_plan.hpp"
#include "qpolicy/source/checkpoint_source.hpp"

namespace {

namespace fz = qpolicy::fuzz;
using qpolicy::source::tensor_header;

/// The text grammar's tensors.
void text_tensors(std::string_view text, std::vector<fz::stored_tensor>& out) {
  for (std::size_t at = 0; at < text.size();) {
    auto end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const auto line = text.substr(at, end - at);
    at = end + 1;
    const auto tab = line.find('\t');
    if (tab == std::string_view::npos || tab + 1 >= line.size()) continue;
    fz::stored_tensor t;
    t.name = std::string(line.substr(0, tab));
    t.type = static_cast<qpolicy::safetensors::dtype>(static_cast<unsigned char>(line[tab + 1]) % 15);
    for (unsigned char d : line.substr(tab + 2)) t.shape.push_back(d == 0xFF ? std::int64_t{1} << 40 : d);
    out.push_back(std::move(t));
  }
}

/// The header-only path: the source read, the layers derived, the tensors checked, the plan composed.
void plan_headers(const boost::json::value& qc, bool gpt_oss, const std::vector<fz::stored_tensor>& tensors, const std::string& online,
                  qpolicy::vllm_release release) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> names;
  std::map<std::string, tensor_header> headers;
  for (const auto& t : tensors) {
    names.emplace_back(t.name, t.shape);
    headers[t.name] = {t.type, t.shape, "model.safetensors"};
  }
  try {
    const auto source = qpolicy::source::read_checkpoint_source(qc, gpt_oss ? "gpt_oss" : "llama");
    const auto model = qpolicy::derive_model(qpolicy::source::weight_names_of(names, source), nullptr);
    qpolicy::source::check_stored_tensors(source, model, [&](const std::string& name) -> const tensor_header* {
      const auto it = headers.find(name);
      return it == headers.end() ? nullptr : &it->second;
    });
    const auto p = qpolicy::compose(qpolicy::make_plan(fz::resolved_online(online, release), model), model, source);
    (void)qpolicy::composed_plan_to_json(p, model);
    (void)qpolicy::composed_plan_to_table(p, model);
  } catch (const qpolicy::config_error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool gpt_oss = data[0] & 1;
  const auto release = static_cast<qpolicy::vllm_release>(((data[0] >> 1) & 7) % 5);
  if (!(data[0] & 0x80)) {
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    const auto newline = text.find('\n');
    boost::system::error_code ec;
    const auto qc = boost::json::parse(text.substr(0, newline), ec);
    if (ec) return 0;
    std::vector<fz::stored_tensor> tensors;
    if (newline != std::string_view::npos) text_tensors(text.substr(newline + 1), tensors);
    plan_headers(qc, gpt_oss, tensors, R"({"linear": "fp8_per_block", "moe": "mxfp4"})", release);
    return 0;
  }
  fz::choices c{data + 1, size - 1};
  const auto d = fz::draw_checkpoint(c, gpt_oss);
  plan_headers(d.quantization_config, gpt_oss, d.tensors, d.online, release);
  return 0;
}

std::vector<std::string> qpolicy::fuzz::seeds() {
  const std::string llama = "model.layers.0.self_attn.q_proj.weight\t\x0d\x08\x10\nmodel.layers.0.self_attn.k_proj.weight\t\x0d\x04\x10\n"
                            "model.layers.0.self_attn.v_proj.weight\t\x0d\x04\x10\nmodel.layers.0.self_attn.q_proj.weight_scale_inv\t\x09\x01\x01\n"
                            "model.layers.0.mlp.experts.0.gate_proj.weight_packed\t\x01\x08\x08\nlm_head.weight\t\x06\x20\x10\n";
  std::vector<std::string> out{
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
      std::string(1, '\x09') + R"({"quant_method": "quark", "export": {"kv_cache_group": []}, "exclude": ["lm_head"], "layer_type_quant_config": {},
        "global_quant_config": {"weight": null}, "layer_quant_config": {"*self_attn*": {"weight": {"dtype": "fp8_e4m3", "qscheme": "per_block",
        "block_size": [128, 128], "symmetric": true}, "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_group", "group_size": 128,
        "is_dynamic": true, "symmetric": true}}, "model.layers.0.mlp.experts": {"weight": {"dtype": "fp4", "qscheme": "per_group",
        "group_size": 32, "scale_format": "e8m0"}}}})" + "\n" +
          "model.layers.0.self_attn.q_proj.weight\t\x0d\x08\x10\nmodel.layers.0.self_attn.q_proj.weight_scale\t\x09\x01\x01\n"
          "model.layers.0.mlp.experts.gate_up_proj_blocks\t\x01\x04\x08\x02\x10\nmodel.layers.0.mlp.experts.gate_up_proj_scales\t\x01\x04\x08\x02\n",
      std::string(1, '\x08') + R"({"quant_method": "modelopt", "quantization": {"quant_algo": "MIXED_PRECISION", "exclude_modules": ["lm_head"],
        "quantized_layers": {"model.layers.0.self_attn.q_proj": {"quant_algo": "FP8_PB_WO"}, "model.layers.0.self_attn.k_proj":
        {"quant_algo": "MXFP8"}, "model.layers.0.mlp.experts.0.gate_proj": {"quant_algo": "NVFP4", "group_size": 16}}}})" + "\n" + llama,
      std::string(1, '\x00') + R"(["not", "an", "object"])" + "\n",
      // Found by this target: a name that is not UTF-8 broke the composed plan's JSON (it was re-parsed).
      std::string("\x08""{\x22""quant_method\x22"": \x22""compressed-tensors\x22"", \x22""ignore\x22"": [\x22""re:.*gate$\x22""], \x22""conffig\x22"": {\x22""config_groups\x22"": {\x22""v\x22"": {}}}}\x0a""model.layers.0.self_attn.q_proj.weight\x09""\x0d""\x08""\x10""\x0a""model.layers.0.self_attn.k_proj.weight\x09""\x0d""\x04""\x10""\x0a""model.l\x9e""\x86""\x9a""\x8d""s.0.self_attn.v_proj.weight\x09""\x0d""\x04""\x10""\x0a""model.layers.1.self_attn.q_proj.weight_scale_inv\x09""\x09""\x01""\x01""\x0a""model.layers.0.mlp.experts.0.gate_proj.weight_packed\x09""\x01""\x08""\x08""\x0a""lm_head.weight\x09""\x06"" \x10""\x0a""", 365),
      // Found by this target: gpt-oss blocks claiming 2^40 experts were expanded expert by expert.
      std::string("\x09""{\x22""quant_method\x22"": \x22""mxfp4\x22""}\x0a""modemodel.layersdel.lts.gate_up_proj_blocks\x09""\x01""\x04""\x08""\x02""\x10""\x0a""model.layers.0.mlp.experts.gate_up_proj_sc\x22"": {\x22""v\x22"": {}}}}\x0a""model.layers.z0.self_attn.q_proj.weight\x09""\x0d""\x08""\x10""\x0a""model.lay\x3f""ers.0.self_atg\x00""tn.k_proj.weight\x09""\x0d""\x04""\x10""\x0a""model.l\x9e""\x86""\x9a""\x8d""s.0.self_attn.v_proj.weight\x09""\x0d""\x04""\x10""\x0a""model.layers.0.selp.experts.gate_up_proj_sc\x22"":inv\x09""\x09""\x01""\x01""\x0a""m\xff""\xff""\xff""\xac""\x09""\x01""4\x00""\x11""\x00""model.layersdel.layers.0.mocks\x04""\x08""\x02""\x0a""model.layers.0.0.mlp.exper.down_proj_blocks\x09""\x01""\xff""\x04""\x01""\x10""\x0a""", 415),
      // Found in use: an fp8 weight_block_size of [128, 0] divided by zero in the stored-tensor checks
      // (the text grammar's digits rarely mutate into a zero; the structured grammar draws one).
      std::string(1, '\x08') + R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 0]})" + "\n" + llama,
  };
  // The structured grammar: every method's well-formed checkpoint.
  for (const auto& s : fz::structured_seeds()) out.push_back(s);
  return out;
}
