// libFuzzer target over the MODEL.json reader, then a plan with shape checks on what it read. Input:
// one flag byte (bit 0: relaxed dialect; bits 1-3: tensor-parallel degree), then the file's text.
// Anything but success or config_error is a finding.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fuzz_target.hpp"
#include "qpolicy/io/json_front.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const auto model = qpolicy::parse_model(text, (data[0] & 1) ? qpolicy::json_dialect::relaxed : qpolicy::json_dialect::strict);
    qpolicy::config_request r;
    r.quantization = (data[0] & 16) ? "fp8_per_tensor" : "fp8_per_block";
    qpolicy::plan_options o;
    o.check_shapes = true;
    o.tp = 1 + ((data[0] >> 1) & 7);
    (void)qpolicy::plan_to_json(qpolicy::make_plan(qpolicy::resolve(r).config, model, o), model);
  } catch (const qpolicy::config_error&) {
  }
  return 0;
}

std::vector<std::string> qpolicy::fuzz::seeds() {
  std::vector<std::string> out{
      // Found by this target: shard sizes whose sum overflowed int64.
      std::string(1, '\x01') + R"({"layers": [{"name": "a.qkv_proj", "class": "QKVParallelLinear", "kind": "linear",
        "shape": [2, 4], "shard_sizes": [9223372036854775807, 9223372036854775807, 2]}]})",
      std::string(1, '\x06') + R"({"layers": [{"name": "m.layers.0.experts", "class": "FusedMoE", "kind": "moe",
        "num_experts": 18446744073709551615, "hidden_size": 1, "intermediate_size": 3}]})",
      std::string(1, '\x00') + R"({"packed_modules_mapping": {"qkv_proj": ["q_proj", ""]}, "layers": []})",
  };
  if (const char* dir = std::getenv("QPOLICY_MODELS"))
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      std::ifstream in(e.path(), std::ios::binary);
      std::ostringstream s;
      s << in.rdbuf();
      for (char flags : {'\x01', '\x05', '\x11'}) out.push_back(flags + s.str());
    }
  return out;
}
