// libFuzzer target over name-based model derivation (quantize without --model): the input is a list
// of tensors, one a line, "NAME\tD..." with each dimension one byte (0xFF: 2^40), then the plan of
// the derived model. Anything but success or config_error is a finding.
#include "fuzz_target.hpp"
#include "qpolicy/io/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> weights;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (std::size_t at = 0; at < text.size();) {
    auto end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const auto line = text.substr(at, end - at);
    at = end + 1;
    const auto tab = line.find('\t');
    std::vector<std::int64_t> shape;
    if (tab != std::string_view::npos)
      for (unsigned char d : line.substr(tab + 1)) shape.push_back(d == 0xFF ? std::int64_t{1} << 40 : d);
    weights.emplace_back(std::string(line.substr(0, tab)), std::move(shape));
  }
  try {
    std::string convention;
    const auto model = qpolicy::derive_model(weights, &convention);
    qpolicy::config_request r;
    r.quantization = "fp8_per_tensor";
    (void)qpolicy::plan_to_json(qpolicy::make_plan(qpolicy::resolve(r).config, model), model);
  } catch (const qpolicy::config_error&) {
  }
  return 0;
}

std::vector<std::string> qpolicy::fuzz::seeds() {
  return {
      "model.layers.0.self_attn.q_proj.weight\t\x08\x10\nmodel.layers.0.self_attn.k_proj.weight\t\x04\x10\n"
      "model.layers.0.self_attn.v_proj.weight\t\x04\x10\nmodel.layers.0.mlp.gate.weight\t\x02\x10\n"
      "model.layers.0.mlp.experts.0.gate_proj.weight\t\x08\x10\nmodel.layers.0.mlp.experts.1.w1.weight\t\x08\x10\n"
      "lm_head.weight\t\x20\x10\nmodel.embed_tokens.weight\t\x20\x10\n.weight\t\x01\x01\nweight\t\x01",
      // Crash inputs of the issue: expert indices past int64 and at its top.
      "model.layers.0.mlp.experts.9223372036854775807.gate_proj.weight\t\x08\x10",
      "model.layers.0.mlp.experts.99999999999999999999999.down_proj.weight\t\x08\x10",
      "a.experts.2147483648.w2.weight\t\xff\x01",
  };
}
