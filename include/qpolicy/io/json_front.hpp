#pragma once
// The runtime front end: vLLM's `quantization` + `quantization_config` (JSON text) and MODEL.json in,
// plain config values, models and plans out. Boost.JSON stays behind this header.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qpolicy/config/config.hpp"
#include "qpolicy/model/model.hpp"
#include "qpolicy/plan/plan.hpp"

namespace qpolicy {

/// Which JSON the text may use: strict RFC 8259 (inline -c), or files' comments and trailing commas.
enum class json_dialect { strict, relaxed };

/// Every field error of one configuration; `what()` and `diag()` give the first.
class config_errors : public config_error {
 public:
  explicit config_errors(std::vector<diagnostic> all) : config_error(all.front()), all_(std::move(all)) {}
  const std::vector<diagnostic>& all() const { return all_; }

 private:
  std::vector<diagnostic> all_;
};

/// The two vLLM arguments as a user gives them.
struct config_request {
  maybe<std::string> quantization;  // -q; empty = None
  maybe<std::string> config_text;   // -c as JSON text; empty = absent (None)
  json_dialect dialect = json_dialect::strict;
  bool legacy = false;
  vllm_release release = newest_release;  // whose rules the current schema follows (spec §9)
};

/// A resolved configuration and what the front end noticed on the way (duplicate keys, deferrals).
struct resolution {
  resolved_config config;
  std::vector<std::string> warnings;
};

/// Parses and resolves (resolve_quantization_config / resolve_online_quant_config). Throws config_error
/// (or config_errors for several field errors) with vLLM's message and location.
resolution resolve(const config_request& request);

/// The resolved configuration as `qpolicy resolve` prints it (one line; "null" for None).
std::string resolved_to_json(const resolved_config& config);

/// Reads a MODEL.json text; unknown fields, bad kinds, duplicate or empty names throw config_error.
model_desc parse_model(std::string_view text, json_dialect dialect = json_dialect::relaxed);

/// Decides every layer (runtime matcher). Throws config_error for errors before any layer.
plan make_plan(const resolved_config& config, const model_desc& model, const plan_options& options = {});

/// `qpolicy plan --format json`: {"layers": [...], "summary": [...], "warnings": [...]}.
std::string plan_to_json(const plan& p, const model_desc& model, const std::vector<std::string>& extra_warnings = {});

/// `qpolicy plan --format table`: aligned columns, the summary and the warnings.
std::string plan_to_table(const plan& p, const model_desc& model, const std::vector<std::string>& extra_warnings = {});

}  // namespace qpolicy
