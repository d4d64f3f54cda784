// Benchmark: parse a realistic config and plan DeepSeek-V3 and a synthetic 1000-layer model with six
// mixed patterns (and again with one of them a lookahead, which runs on the backtracking VM); the
// baseline is a naive per-layer std::regex matcher measured in the same run. Best and median of 50.
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

struct timing {
  double best, median;
};
timing best_and_median_us(int reps, const std::function<void()>& fn) {
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) us.push_back(1e6 * bench::best_seconds(1, fn));
  std::sort(us.begin(), us.end());
  return {us.front(), us[us.size() / 2]};
}

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

timing report(const char* name, const model_desc& model, const std::string& config_text, const std::vector<std::string>& patterns) {
  config_request req;
  req.quantization = "fp8_per_block";
  req.config_text = config_text;
  std::size_t quantized = 0;
  // Each run parses and resolves the config and plans the model, as a caller planning a request does;
  // the compiled pattern set is reused across runs (match::pooled_pattern_set), as it is across calls.
  const auto ours = best_and_median_us(50, [&] {
    const auto res = resolve(req);
    quantized = make_plan(res.config, model).count(method::fp8_per_block);
  });
  const naive_matcher naive(patterns);
  std::size_t naive_ignored = 0;
  const double base = best_us(5, [&] { naive_ignored = naive.decide(model); });
  fmt::print("bench: {}_parse_plan {:.1f} us vs naive_std_regex {:.2f}x\n", name, ours.best, base / ours.best);
  fmt::print("bench: {}_parse_plan_median {:.1f} us\n", name, ours.median);
  fmt::print("bench: {}_per_layer {:.3f} us vs naive_std_regex {:.2f}x\n", name, ours.best / model.layers.size(), base / ours.best);
  fmt::print("# {}: {} layers, {} per-block, naive ignored {}\n", name, model.layers.size(), quantized, naive_ignored);
  return ours;
}

std::string ignore_json(const std::vector<std::string>& patterns) {
  std::string out = "{\"ignore\":[";
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    std::string esc;
    for (char c : patterns[i]) {
      if (c == '\\' || c == '"') esc += '\\';
      esc += c;
    }
    out += (i ? ",\"" : "\"") + esc + "\"";
  }
  return out + "]}";
}

}  // namespace

int main() {
  const char* models = std::getenv("QPOLICY_MODELS");
  const std::vector<std::string> six{"lm_head", "re:model\\.layers\\.(0|1|2)\\.", "*.mlp.experts",
                                     "re:.*\\.q_proj$", "model.layers.7.self_attn.o_proj", "re:.*layers\\.[3-5]\\d\\.mlp\\.down_proj"};
  // Six patterns incl. a shard regex: q_proj alone makes QKV layers disagree, so drop it for the real models.
  const std::vector<std::string> real{"lm_head", "re:model\\.layers\\.(0|1|2)\\.", "*.mlp.experts",
                                      "re:.*\\.(q_a|kv_a)_proj.*", "model.layers.7.self_attn.o_proj", "re:.*layers\\.[3-5]\\d\\.mlp\\.down_proj"};
  std::string real_json = R"({"ignore":["lm_head","re:model\\.layers\\.(0|1|2)\\.","*.mlp.experts","re:.*\\.(q_a|kv_a)_proj.*","model.layers.7.self_attn.o_proj","re:.*layers\\.[3-5]\\d\\.mlp\\.down_proj"]})";
  const auto synthetic = synthetic_model(1000);
  const auto dfa_only = report("synthetic_1000", synthetic, ignore_json(six), six);
  // The same six with the last one written as "every down_proj but those of layers 0-29", a lookahead.
  auto with_lookahead = six;
  with_lookahead.back() = "re:.*layers\\.(?![0-2]\\d\\.)\\d+\\.mlp\\.down_proj";
  const auto look = report("synthetic_1000_lookahead", synthetic, ignore_json(with_lookahead), with_lookahead);
  fmt::print("bench: synthetic_1000_lookahead_vs_dfa_only {:.1f} us vs synthetic_1000_parse_plan {:.2f}x\n", look.best,
             look.best / dfa_only.best);
  if (models) report("deepseek_v3", parse_model(slurp(std::string(models) + "/deepseek-v3.json")), real_json, real);
  return 0;
}
