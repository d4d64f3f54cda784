// Hostile suite, already-quantized checkpoints: a model directory of every checkpoint method the readers
// know, damaged one way at a time (a scale missing, mis-shaped or of another dtype, codes of another
// shape, the file truncated, an unknown method, a field of the wrong type, a zero or negative block
// size). `plan --model-dir` and `quantize` each refuse it with exit 2 and the `error:` line first, write
// nothing, and leave the directory as it was.
#include <functional>

#include "hostile.hpp"

using namespace hostile;

namespace {

/// One stored tensor: name, dtype, shape (its data is `fill` bytes).
struct stored {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
};

std::int64_t bytes_of(const stored& t) {
  std::int64_t n = t.dtype == "F32" || t.dtype == "I32" ? 4 : t.dtype == "BF16" || t.dtype == "F16" ? 2 : t.dtype == "I64" ? 8 : 1;
  for (const auto d : t.shape) n *= d;
  return n;
}

/// A checkpoint method's model directory: config.json's quantization_config and model_type, and the
/// tensors of one block (attention q/k/v/o and two experts, or gpt-oss's fused expert blocks), 128 wide.
struct quantized_case {
  std::string name, model_type, quantization_config;
  std::vector<stored> tensors;
  std::string codes, scale;  // the first quantized module's codes and scale tensors, which the damages hit
  std::string block_field;   // the config's block or group size field as a JSON key, "" for none
  std::string zero_block, negative_block, wrong_type;  // quantization_configs with that field damaged
};

/// The tensors of every module `m` of one block stored by `layout(m, out)`, and the unquantized rest.
std::vector<stored> block_tensors(const std::function<void(const std::string&, std::vector<stored>&)>& layout, bool fused_experts) {
  std::vector<stored> out{{"model.embed_tokens.weight", "BF16", {64, 128}}};
  for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"}) layout(std::string("model.layers.0.self_attn.") + p, out);
  out.push_back({"model.layers.0.mlp.gate.weight", "BF16", {2, 128}});
  if (fused_experts) {
    for (const auto& [proj, rows] : {std::pair<std::string, std::int64_t>{"gate_up_proj", 256}, {"down_proj", 128}}) {
      out.push_back({"model.layers.0.mlp.experts." + proj + "_blocks", "U8", {2, rows, 4, 16}});
      out.push_back({"model.layers.0.mlp.experts." + proj + "_scales", "U8", {2, rows, 4}});
    }
  } else {
    for (int e = 0; e < 2; ++e)
      for (const char* p : {"gate_proj", "up_proj", "down_proj"}) layout("model.layers.0.mlp.experts." + std::to_string(e) + "." + p, out);
  }
  out.push_back({"lm_head.weight", "BF16", {64, 128}});
  return out;
}

std::vector<quantized_case> cases() {
  const std::string q = "model.layers.0.self_attn.q_proj.";
  auto fp8_blocks = [](const std::string& m, std::vector<stored>& out) {
    out.push_back({m + ".weight", "F8_E4M3", {128, 128}});
    out.push_back({m + ".weight_scale_inv", "F32", {1, 1}});
  };
  auto fp8_tensor = [](const std::string& m, std::vector<stored>& out) {
    out.push_back({m + ".weight", "F8_E4M3", {128, 128}});
    out.push_back({m + ".weight_scale", "F32", {1}});
  };
  auto nvfp4 = [](const std::string& m, std::vector<stored>& out) {
    out.push_back({m + ".weight_packed", "U8", {128, 64}});
    out.push_back({m + ".weight_scale", "F8_E4M3", {128, 8}});
    out.push_back({m + ".weight_global_scale", "F32", {1}});
  };
  auto mxfp4 = [](const std::string& m, std::vector<stored>& out) {
    out.push_back({m + ".weight_packed", "U8", {128, 64}});
    out.push_back({m + ".weight_scale", "U8", {128, 4}});
  };
  auto mxfp8 = [](const std::string& m, std::vector<stored>& out) {
    out.push_back({m + ".weight", "F8_E4M3", {128, 128}});
    out.push_back({m + ".weight_scale", "U8", {128, 4}});
  };
  auto float_channel = [](const std::string& m, std::vector<stored>& out) {
    if (m.find("self_attn") == std::string::npos) return void(out.push_back({m + ".weight", "BF16", {128, 128}}));
    out.push_back({m + ".weight", "F8_E4M3", {128, 128}});
    out.push_back({m + ".weight_scale", "F32", {128, 1}});
  };
  auto int8_words = [](const std::string& m, std::vector<stored>& out) {
    out.push_back({m + ".weight_packed", "I32", {128, 32}});
    out.push_back({m + ".weight_scale", "BF16", {128, 1}});
    out.push_back({m + ".weight_shape", "I64", {2}});
  };
  auto modelopt_nvfp4 = [](const std::string& m, std::vector<stored>& out) {
    out.push_back({m + ".weight", "U8", {128, 64}});
    out.push_back({m + ".weight_scale", "F8_E4M3", {128, 8}});
    out.push_back({m + ".weight_scale_2", "F32", {1}});
  };
  auto bf16 = [](const std::string& m, std::vector<stored>& out) { out.push_back({m + ".weight", "BF16", {128, 128}}); };
  const std::string ct = R"({"quant_method": "compressed-tensors", "format": "FORMAT", "ignore": ["lm_head"], "config_groups": {"group_0":
      {"targets": [TARGETS], "weights": {"num_bits": BITS, "type": "TYPE", "strategy": "STRATEGY", "group_size": GROUP, "symmetric": true,
       "dynamic": false SCALE}}}})";
  auto ct_config = [&](std::string format, std::string targets, std::string bits, std::string type, std::string strategy, std::string group,
                       std::string scale = "") {
    std::string s = ct;
    for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"FORMAT", format}, {"TARGETS", targets}, {"BITS", bits}, {"TYPE", type}, {"STRATEGY", strategy}, {"GROUP", group}, {"SCALE", scale}})
      s.replace(s.find(k), k.size(), v);
    return s;
  };
  const std::string fp8 = R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": BLOCK})";
  auto with = [](std::string s, const std::string& key, const std::string& value) { return s.replace(s.find(key), key.size(), value); };
  const std::string modelopt = R"({"quant_method": "modelopt", "quantization": {"quant_algo": "ALGO", "group_size": GROUP,
      "kv_cache_quant_algo": null, "exclude_modules": ["lm_head"]}})";
  auto mo = [&](const std::string& algo, const std::string& group) { return with(with(modelopt, "ALGO", algo), "GROUP", group); };
  std::vector<quantized_case> out;
  out.push_back({"fp8 blocks", "llama", with(fp8, "BLOCK", "[128, 128]"), block_tensors(fp8_blocks, false), q + "weight", q + "weight_scale_inv",
                 "weight_block_size", with(fp8, "BLOCK", "[128, 0]"), with(fp8, "BLOCK", "[-128, 128]"), with(fp8, "BLOCK", "\"128x128\"")});
  out.push_back({"fp8 per tensor", "llama", R"({"quant_method": "fp8", "activation_scheme": "dynamic"})", block_tensors(fp8_tensor, false),
                 q + "weight", q + "weight_scale", "", "", "", R"({"quant_method": "fp8", "activation_scheme": "dynamic", "ignored_layers": "lm_head"})"});
  const auto nv = [&](const std::string& g) { return ct_config("nvfp4-pack-quantized", "\"Linear\"", "4", "float", "tensor_group", g); };
  out.push_back({"compressed-tensors nvfp4", "llama", nv("16"), block_tensors(nvfp4, false), q + "weight_packed", q + "weight_scale", "group_size",
                 nv("0"), nv("-16"), nv("\"sixteen\"")});
  const auto mx4 = [&](const std::string& g) { return ct_config("mxfp4-pack-quantized", "\"Linear\"", "4", "float", "group", g); };
  out.push_back({"compressed-tensors mxfp4", "llama", mx4("32"), block_tensors(mxfp4, false), q + "weight_packed", q + "weight_scale", "group_size",
                 mx4("0"), mx4("-2"), mx4("[32]")});
  const auto mx8 = [&](const std::string& g) {
    return ct_config("mxfp8-quantized", "\"Linear\"", "8", "float", "group", g, ", \"scale_dtype\": \"torch.uint8\"");
  };
  out.push_back({"compressed-tensors mxfp8", "llama", mx8("32"), block_tensors(mxfp8, false), q + "weight", q + "weight_scale", "group_size",
                 mx8("0"), mx8("-5"), mx8("32.5")});
  const auto fc = [&](const std::string& bits) {
    return ct_config("float-quantized", "\"re:.*self_attn.*\"", bits, "float", "channel", "null");
  };
  out.push_back({"compressed-tensors float per channel", "llama", fc("8"), block_tensors(float_channel, false), q + "weight", q + "weight_scale",
                 "num_bits", fc("0"), fc("-8"), fc("\"eight\"")});
  const auto pk = [&](const std::string& bits) { return ct_config("pack-quantized", "\"Linear\"", bits, "int", "channel", "null"); };
  out.push_back({"compressed-tensors pack-quantized int8", "llama", pk("8"), block_tensors(int8_words, false), q + "weight_packed",
                 q + "weight_scale", "num_bits", pk("0"), pk("-4"), pk("[8]")});
  const std::string e = "model.layers.0.mlp.experts.gate_up_proj_";
  out.push_back({"gpt-oss mxfp4", "gpt_oss", R"({"quant_method": "mxfp4"})", block_tensors(bf16, true), e + "blocks", e + "scales", "", "", "",
                 R"({"quant_method": ["mxfp4"]})"});
  out.push_back({"modelopt fp8", "llama", mo("FP8", "null"), block_tensors(fp8_tensor, false), q + "weight", q + "weight_scale", "group_size",
                 "", "", with(mo("FP8", "null"), "\"kv_cache_quant_algo\": null", "\"kv_cache_quant_algo\": 8")});
  out.push_back({"modelopt nvfp4", "llama", mo("NVFP4", "16"), block_tensors(modelopt_nvfp4, false), q + "weight", q + "weight_scale",
                 "group_size", mo("NVFP4", "0"), mo("NVFP4", "-16"), mo("NVFP4", "[16]")});
  // Quark as quantize writes it for gpt-oss: FP8 128x128 blocks on the attention, the fused MXFP4 experts kept.
  auto fp8_block_grid = [](const std::string& m, std::vector<stored>& out) {
    out.push_back({m + ".weight", "F8_E4M3", {128, 128}});
    out.push_back({m + ".weight_scale", "F32", {1, 1}});
  };
  const std::string quark = R"({"quant_method": "quark", "export": {"kv_cache_group": [], "pack_method": "reorder"}, "exclude": ["lm_head"],
      "layer_type_quant_config": {}, "global_quant_config": {"weight": null}, "layer_quant_config": {
      "model.layers.0.mlp.experts": {"weight": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}},
      "re:never": null, "*self_attn*": {"weight": {"dtype": "fp8_e4m3", "qscheme": "per_block", "block_size": BLOCK, "symmetric": true},
        "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_group", "group_size": 128, "is_dynamic": true, "symmetric": true}}}})";
  out.push_back({"quark fp8 blocks and gpt-oss mxfp4", "gpt_oss", with(quark, "BLOCK", "[128, 128]"), block_tensors(fp8_block_grid, true), q + "weight",
                 q + "weight_scale", "block_size", with(quark, "BLOCK", "[128, 0]"), with(quark, "BLOCK", "[-128, 128]"),
                 with(with(quark, "BLOCK", "[128, 128]"), "\"exclude\": [\"lm_head\"]", "\"exclude\": \"lm_head\"")});
  // ModelOpt MIXED_PRECISION as quantize writes it: FP8_PB_WO attention (4-D block scales), NVFP4 experts kept.
  auto mixed_layout = [&](const std::string& m, std::vector<stored>& out) {
    if (m.find("self_attn") == std::string::npos) return modelopt_nvfp4(m, out);
    out.push_back({m + ".weight", "F8_E4M3", {128, 128}});
    out.push_back({m + ".weight_scale", "F32", {1, 1, 1, 1}});
  };
  auto mixed = [](const std::string& group) {
    std::string layers;
    for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"})
      layers += std::string(layers.empty() ? "" : ", ") + "\"model.layers.0.self_attn." + p + "\": {\"quant_algo\": \"FP8_PB_WO\"}";
    for (int e = 0; e < 2; ++e)
      for (const char* p : {"gate_proj", "up_proj", "down_proj"})
        layers += ", \"model.layers.0.mlp.experts." + std::to_string(e) + "." + p + "\": {\"quant_algo\": \"NVFP4\", \"group_size\": " + group + "}";
    return R"({"quant_method": "modelopt", "quantization": {"quant_algo": "MIXED_PRECISION", "exclude_modules": ["lm_head"],
        "kv_cache_quant_algo": null, "quantized_layers": {)" + layers + "}}}";
  };
  out.push_back({"modelopt mixed precision", "llama", mixed("16"), block_tensors(mixed_layout, false), q + "weight", q + "weight_scale", "group_size",
                 mixed("0"), mixed("-16"), with(mixed("16"), "\"exclude_modules\": [\"lm_head\"]", "\"exclude_modules\": \"lm_head\"")});
  return out;
}

/// Writes the case's directory (tensors filled with 0x3c: finite codes and scales in every format).
void write_case(const fs::path& dir, const std::string& model_type, const std::string& quantization_config, const std::vector<stored>& tensors,
                std::size_t truncate = 0) {
  fs::create_directories(dir);
  write_file(dir / "config.json", "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"" + model_type +
                                      "\", \"torch_dtype\": \"bfloat16\", \"quantization_config\": " + quantization_config + "}\n");
  std::string header = "{";
  std::int64_t at = 0;
  for (const auto& t : tensors) {
    std::string shape;
    for (const auto d : t.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    header += (header.size() > 1 ? ", " : "") + ("\"" + t.name + "\": {\"dtype\": \"" + t.dtype + "\", \"shape\": [" + shape +
                                                  "], \"data_offsets\": [" + std::to_string(at) + ", " + std::to_string(at + bytes_of(t)) + "]}");
    at += bytes_of(t);
  }
  std::string data(static_cast<std::size_t>(at), '\x3c');
  // weight_shape holds [N, K] = [128, 128].
  std::int64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.ends_with(".weight_shape") && t.dtype == "I64" && t.shape == std::vector<std::int64_t>{2})
      for (int i = 0; i < 2; ++i)
        for (int b = 0; b < 8; ++b) data[static_cast<std::size_t>(offset + i * 8 + b)] = b == 0 ? '\x80' : '\0';
    offset += bytes_of(t);
  }
  auto file = safetensors(header + "}", data);
  file.resize(file.size() - truncate);
  write_file(dir / "model.safetensors", file);
}

/// Both commands on the directory: exit 2, `error:` first and naming `what`, no output, nothing changed.
void check_both_refuse(const fs::path& root, const fs::path& dir, const std::string& what) {
  INFO("damage: " << read_file(dir / "damage"));
  const auto before = list(root), files = list(dir);
  const auto out = root / "out";
  for (const auto& args : {std::vector<std::string>{"plan", "--model-dir", dir, "-c", R"({"linear": "fp8_per_channel"})"},
                           std::vector<std::string>{"quantize", "-c", R"({"linear": "fp8_per_channel"})", dir, "-o", out}}) {
    INFO(args[0]);
    const auto r = run_qpolicy(args);
    check_refused(r, 2, what, root, before);
    CHECK(r.err.starts_with("error: "));
    CHECK(r.out.empty());
    CHECK(list(dir) == files);
    CHECK_FALSE(fs::exists(out));
    fs::remove_all(out);  // a failed case does not fail the next ones
  }
}

}  // namespace

TEST_CASE("damaged quantized checkpoints of every method: exit 2, the error first, nothing written, the input unchanged",
          "[hostile][quantized]") {
  temp_dir tmp("hostile-quantized");
  for (const auto& c : cases()) {
    INFO(c.name);
    // The undamaged directory plans.
    const auto good = tmp.path() / "good";
    fs::remove_all(good);
    write_case(good, c.model_type, c.quantization_config, c.tensors);
    const auto ok = run_qpolicy({"plan", "--model-dir", good});
    INFO(ok.err);
    REQUIRE(ok.status == 0);
    fs::remove_all(good);

    const auto dir = tmp.path() / "in";
    auto damaged = [&](const std::string& what, const std::function<void(std::string&, std::vector<stored>&)>& damage,
                       std::size_t truncate = 0) {
      INFO(what);
      fs::remove_all(dir);
      auto qc = c.quantization_config;
      auto tensors = c.tensors;
      damage(qc, tensors);
      write_case(dir, c.model_type, qc, tensors, truncate);
      write_file(dir / "damage", what);
      return dir;
    };
    auto tensor = [&](std::vector<stored>& ts, const std::string& name) -> stored& {
      for (auto& t : ts)
        if (t.name == name) return t;
      FAIL("no tensor " << name);
      throw;
    };
    check_both_refuse(tmp.path(), damaged("scale missing", [&](auto&, auto& ts) { std::erase_if(ts, [&](auto& t) { return t.name == c.scale; }); }),
                      "tensor '" + c.scale + "' is missing");
    check_both_refuse(tmp.path(), damaged("scale mis-shaped", [&](auto&, auto& ts) { tensor(ts, c.scale).shape[0] += 1; }), "tensor '" + c.scale + "'");
    check_both_refuse(tmp.path(), damaged("scale dtype", [&](auto&, auto& ts) {
                        auto& t = tensor(ts, c.scale);
                        t.dtype = t.dtype == "U8" ? "I8" : "I32";  // no format stores a scale as either
                      }),
                      "tensor '" + c.scale + "'");
    check_both_refuse(tmp.path(), damaged("codes shape", [&](auto&, auto& ts) { tensor(ts, c.codes).shape.push_back(1); }), "tensor '" + c.codes + "'");
    check_both_refuse(tmp.path(), damaged("truncated", [](auto&, auto&) {}, 100), "model.safetensors");
    check_both_refuse(tmp.path(), damaged("unknown method", [](auto& qc, auto&) { qc = R"({"quant_method": "awq", "bits": 4})"; }),
                      "config.json: the checkpoint's quantization_config has quant_method 'awq', which this build does not read");
    check_both_refuse(tmp.path(), damaged("field of the wrong type", [&](auto& qc, auto&) { qc = c.wrong_type; }), "config.json: ");
    if (!c.zero_block.empty()) {
      check_both_refuse(tmp.path(), damaged("zero block size", [&](auto& qc, auto&) { qc = c.zero_block; }), c.block_field);
      check_both_refuse(tmp.path(), damaged("negative block size", [&](auto& qc, auto&) { qc = c.negative_block; }), c.block_field);
    }
  }
}

TEST_CASE("an fp8 checkpoint with weight_block_size [128, 0] is a named refusal, not SIGFPE", "[hostile][quantized]") {
  temp_dir tmp("hostile-fp8-zero-block");
  const auto dir = tmp.path() / "in";
  const auto c = cases().front();
  write_case(dir, "llama", R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 0]})", c.tensors);
  const auto r = run_qpolicy({"plan", "--model-dir", dir, "-q", "online", "-c", R"({"linear": "fp8_per_channel"})"});
  CHECK(r.status == 2);
  CHECK(r.err.starts_with("error: " + (dir / "config.json").string() + ": quantization_config.weight_block_size is [128,0]; expected two "
                          "positive integers [block_n, block_k]"));
}

TEST_CASE("a compressed-tensors checkpoint vLLM cannot build: the error line is stderr's first", "[hostile][quantized]") {
  temp_dir tmp("hostile-ct-first-line");
  const auto dir = tmp.path() / "in";
  auto float_all = [](const std::string& m, std::vector<stored>& out) {
    out.push_back({m + ".weight", "F8_E4M3", {128, 128}});
    out.push_back({m + ".weight_scale", "F32", {128, 1}});
  };
  // FP8 per-channel weights without input activations for the experts: vLLM's WNA16 MoE method refuses them.
  write_case(dir, "llama", R"({"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {"group_0": {"targets":
      ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}})", block_tensors(float_all, false));
  for (const char* format : {"table", "json"}) {
    const auto r = run_qpolicy({"plan", "--model-dir", dir, "--format", format});
    CHECK(r.status == 2);
    CHECK(r.err.starts_with("error: For Fused MoE layers, only format: pack-quantized and bits: [4, 8] is supported"));
    CHECK_THAT(r.err, Catch::Contains("\nderived "));  // what was derived still follows
  }
}
