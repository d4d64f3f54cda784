// libFuzzer target over the checkpoint index reader: the input is a model.safetensors.index.json
// beside two fixed shards; `quantize` runs on it in a private directory (quantize_run.hpp: shards
// unchanged, nothing left after a refusal). Anything but success or config_error is a finding.
#include "fuzz_target.hpp"
#include "quantize_run.hpp"

namespace {

void write_shards() {
  using namespace qpolicy::fuzz;
  put(run_dir() / "model-00001-of-00002.safetensors",
      safetensors_bytes(R"({"model.layers.0.self_attn.o_proj.weight": {"dtype": "BF16", "shape": [4, 16], "data_offsets": [0, 128]}})",
                        std::string(128, '\x3c')));
  put(run_dir() / "model-00002-of-00002.safetensors",
      safetensors_bytes(R"({"model.layers.0.mlp.down_proj.weight": {"dtype": "BF16", "shape": [4, 16], "data_offsets": [0, 128]},
        "lm_head.weight": {"dtype": "BF16", "shape": [2, 16], "data_offsets": [128, 192]}})", std::string(192, '\x3d')));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace qpolicy::fuzz;
  static const bool shards = (write_shards(), true);
  (void)shards;
  put(run_dir() / "model.safetensors.index.json", {reinterpret_cast<const char*>(data), size});
  qpolicy::config_request r;
  r.quantization = "fp8_per_channel";
  qpolicy::checkpoint_request req;
  req.inputs = {(run_dir() / "model.safetensors.index.json").string()};
  req.output = (run_dir() / "out.safetensors").string();
  req.config = qpolicy::resolve(r).config;
  req.threads = 1;
  quantize_and_check(req, {"model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"});
  return 0;
}

std::vector<std::string> qpolicy::fuzz::seeds() {
  return {
      R"({"metadata": {"total_size": 448}, "weight_map": {"model.layers.0.self_attn.o_proj.weight": "model-00001-of-00002.safetensors",
        "model.layers.0.mlp.down_proj.weight": "model-00002-of-00002.safetensors", "lm_head.weight": "model-00002-of-00002.safetensors"}})",
      // Duplicate keys, a tensor in the wrong shard, a missing one, a path outside the directory.
      R"({"weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors", "lm_head.weight": "model-00002-of-00002.safetensors",
        "model.layers.0.self_attn.o_proj.weight": "model-00001-of-00002.safetensors", "model.layers.0.mlp.down_proj.weight": "model-00002-of-00002.safetensors"}})",
      R"({"weight_map": {"model.layers.0.self_attn.o_proj.weight": "model-00002-of-00002.safetensors"}})",
      R"({"weight_map": {"x": "../model-00001-of-00002.safetensors"}})",
      R"({"weight_map": {"x": "model.safetensors.index.json"}})",
      R"({"weight_map": {"x": "."}})",
      R"({"weight_map": []})",
  };
}
