// Benchmark: parse a realistic config and plan DeepSeek-V3 and a synthetic 1000-layer model with six
// mixed patterns; the baseline is a naive per-layer std::regex matcher measured in the same run.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "best_time.hpp"
#include "qpolicy/io/json_front.hpp"

using namespace qpolicy;

namespace {

double best_us(int reps, const std::function<void()>& fn) { return 1e6 * bench::best_seconds(reps, fn); }

// The naive way: every pattern as a std::regex, tried on every layer and shard name.
struct naive_matcher {
  std::vector<std::regex> res;
  explicit naive_matcher(const std::vector<std::string>& patterns) {
    for (const auto& p : patterns) {
      std::string rx;
      if (p.rfind("re:", 0) == 0) rx = p.substr(3) + ".*";
      else
        for (char c : p) {
          if (c == '*') rx += ".*";
          else if (c == '?') rx += '.';
          else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') rx += c;
          else { rx += '\\'; rx += c; }
        }
      res.emplace_back(rx);
    }
  }
  std::size_t decide(const model_desc& m) const {
    std::size_t ignored = 0;
    for (const auto& l : m.layers) {
      bool hit = false;
      for (const auto& r : res) hit |= std::regex_match(l.name, r);
      if (!hit)
        if (const auto* p = m.fused_entry(l.name))
          for (const auto& s : p->shards) {
            const auto shard = text::replace_all(l.name, p->fused, s);
            for (const auto& r : res) hit |= std::regex_match(shard, r);
          }
      ignored += hit;
    }
    return ignored;
  }
};

model_desc synthetic_model(int n_layers) {
  model_desc m{"synthetic", {{"qkv_proj", {"q_proj", "k_proj", "v_proj"}}, {"gate_up_proj", {"gate_proj", "up_proj"}}}, {}};
  const char* parts[] = {"self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj", "mlp.experts"};
  for (int i = 0; m.layers.size() < static_cast<std::size_t>(n_layers); ++i)
    for (int k = 0; k < 5 && m.layers.size() < static_cast<std::size_t>(n_layers); ++k)
      m.layers.push_back({"model.layers." + std::to_string(i) + "." + parts[k], k == 4 ? "FusedMoE" : "RowParallelLinear",
                          k == 4 ? layer_kind::moe : layer_kind::linear});
  return m;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void report(const char* name, const model_desc& model, const std::string& config_text, const std::vector<std::string>& patterns) {
  config_request req;
  req.quantization = "fp8_per_block";
  req.config_text = config_text;
  std::size_t quantized = 0;
  const double ours = best_us(50, [&] {
    const auto res = resolve(req);
    quantized = make_plan(res.config, model).count(method::fp8_per_block);
  });
  const naive_matcher naive(patterns);
  std::size_t naive_ignored = 0;
  const double base = best_us(5, [&] { naive_ignored = naive.decide(model); });
  fmt::print("bench: {}_parse_plan {:.1f} us vs naive_std_regex {:.2f}x\n", name, ours, base / ours);
  fmt::print("bench: {}_per_layer {:.3f} us vs naive_std_regex {:.2f}x\n", name, ours / model.layers.size(), base / ours);
  fmt::print("# {}: {} layers, {} per-block, naive ignored {}\n", name, model.layers.size(), quantized, naive_ignored);
}

}  // namespace

int main() {
  const char* models = std::getenv("QPOLICY_MODELS");
  const std::vector<std::string> six{"lm_head", "re:model\\.layers\\.(0|1|2)\\.", "*.mlp.experts",
                                     "re:.*\\.q_proj$", "model.layers.7.self_attn.o_proj", "re:.*layers\\.[3-5]\\d\\.mlp\\.down_proj"};
  std::string six_json = "{\"ignore\":[";
  for (std::size_t i = 0; i < six.size(); ++i) {
    std::string esc;
    for (char c : six[i]) { if (c == '\\' || c == '"') esc += '\\'; esc += c; }
    six_json += (i ? ",\"" : "\"") + esc + "\"";
  }
  six_json += "]}";
  // Six patterns incl. a shard regex: q_proj alone makes QKV layers disagree, so drop it for the real models.
  const std::vector<std::string> real{"lm_head", "re:model\\.layers\\.(0|1|2)\\.", "*.mlp.experts",
                                      "re:.*\\.(q_a|kv_a)_proj.*", "model.layers.7.self_attn.o_proj", "re:.*layers\\.[3-5]\\d\\.mlp\\.down_proj"};
  std::string real_json = R"({"ignore":["lm_head","re:model\\.layers\\.(0|1|2)\\.","*.mlp.experts","re:.*\\.(q_a|kv_a)_proj.*","model.layers.7.self_attn.o_proj","re:.*layers\\.[3-5]\\d\\.mlp\\.down_proj"]})";
  report("synthetic_1000", synthetic_model(1000), six_json, six);
  if (models) report("deepseek_v3", parse_model(slurp(std::string(models) + "/deepseek-v3.json")), real_json, real);
  return 0;
}
