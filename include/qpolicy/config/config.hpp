#pragma once
// Plain config values of both schemas and the rules that act on values (spec §3.2-§3.5, §5): merging,
// mutual exclusion, "at least one set". Both front ends (JSON, types) build these values and call
// these functions, so every rule and message exists once.
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "qpolicy/core/detail/maybe.hpp"
#include "qpolicy/keys/release.hpp"

namespace qpolicy {

/// A message with its field location ("" when the rule names no field).
struct diagnostic {
  std::string loc;
  std::string message;
  constexpr bool operator==(const diagnostic&) const = default;
  /// "LOC: MESSAGE" or "MESSAGE", as the CLI prints it after "error: ".
  constexpr std::string text() const {
    if (loc.empty()) return message;  // not ?: (GCC 12 destroys a ?: string temporary twice in constexpr)
    return loc + ": " + message;
  }
};

/// Raised by the runtime front end for an invalid configuration, model or input (exit status 2).
class config_error : public std::runtime_error {
 public:
  explicit config_error(diagnostic d) : std::runtime_error(d.text()), diag_(std::move(d)) {}
  config_error(std::string loc, std::string message) : config_error(diagnostic{std::move(loc), std::move(message)}) {}
  const diagnostic& diag() const { return diag_; }
  const std::string& loc() const { return diag_.loc; }
  const std::string& message() const { return diag_.message; }

 private:
  diagnostic diag_;
};

/// QuantSpec{weight, activation, hadamard_size}; `*_set` is pydantic's fields_set (not part of
/// equality); hadamard_size 0 is None.
struct quant_spec {
  std::optional<key_id> weight{};
  std::optional<key_id> activation{};
  bool weight_set = false;
  bool activation_set = false;
  std::int64_t hadamard_size = 0;
  constexpr bool operator==(const quant_spec& o) const {
    return weight == o.weight && activation == o.activation && hadamard_size == o.hadamard_size;
  }
};

/// str(spec) in release r (spec §9.2, §9.4): the weight key's name (or None); from 0.34 the JSON form
/// when the activation was written, and `_hadamard{n}` when rotated.
constexpr std::string spec_str(const quant_spec& s, vllm_release r) {
  auto name = [r](const std::optional<key_id>& k) -> std::string {
    if (k) return key_name(*k, r);
    return "None";
  };
  if (!rules(r).fields_set) return name(s.weight);
  std::string out;
  if (!s.activation_set) {
    out = name(s.weight);
  } else {
    auto json = [r](const std::optional<key_id>& k) -> std::string {
      if (!k) return "null";
      // Appended, not `"\"" + name`: GCC 12 warns falsely (-Wrestrict) on a literal + a temporary.
      std::string quoted("\"");
      quoted.append(key_name(*k, r)).append("\"");
      return quoted;
    };
    out = "{\"weight\":" + json(s.weight) + ",\"activation\":" + json(s.activation) + "}";
  }
  if (s.hadamard_size) out += "_hadamard" + text::to_decimal(static_cast<long long>(s.hadamard_size));
  return out;
}
constexpr std::string spec_str(const std::optional<quant_spec>& s, vllm_release r) {
  if (s) return spec_str(*s, r);
  return "None";
}

/// repr(QuantKey) / repr(QuantSpec): the dataclasses' own reprs, as a targets dict prints a spec value.
constexpr std::string key_dataclass_repr(key_id k) {
  auto dt = [](dtype d) -> std::string {
    constexpr std::array<std::string_view, 6> torch{"torch.float8_e4m3fn", "torch.uint8", "torch.int8",
                                                    "torch.float32", "torch.float16", "ScalarType.uint4b8"};
    return std::string(torch[static_cast<std::size_t>(d)]);
  };
  auto scale = [&](const scale_desc& d) {
    return "ScaleDesc(dtype=" + dt(d.type) + ", static=" + (d.is_static ? "True" : "False") + ", group_shape=GroupShape(row=" +
           text::to_decimal(d.group.row) + ", col=" + text::to_decimal(d.group.col) + "))";
  };
  const auto& key = key_of(k);
  std::string out = "QuantKey(dtype=" + dt(key.data) + ", scale=" + scale(key.scale) + ", scale2=";
  if (key.scale2) out += scale(*key.scale2);
  else out += "None";
  return out + ", symmetric=" + (key.symmetric ? "True" : "False") + ")";
}
constexpr std::string spec_dataclass_repr(const quant_spec& s) {
  auto key = [](const std::optional<key_id>& k) -> std::string {
    if (k) return key_dataclass_repr(*k);
    return "None";
  };
  std::string out = "QuantSpec(weight=" + key(s.weight) + ", activation=" + key(s.activation) + ", hadamard_size=";
  if (s.hadamard_size) out += text::to_decimal(static_cast<long long>(s.hadamard_size));
  else out += "None";
  return out + ")";
}

/// One `targets` entry, in input order: pattern -> an online shorthand, or (from 0.34) a spec.
struct target_rule {
  std::string pattern;
  std::optional<shorthand> value{};  // empty: the value is `spec`
  quant_spec spec{};
  constexpr bool operator==(const target_rule&) const = default;
};

/// QuantizationConfigArgs (current schema), under the rules of `release`.
struct current_config {
  std::optional<quant_spec> linear{};
  std::optional<quant_spec> moe{};
  std::vector<std::string> ignore{};
  maybe<std::vector<target_rule>> targets{};
  vllm_release release = newest_release;
  constexpr bool operator==(const current_config&) const = default;
};

/// OnlineQuantizationConfigArgs (legacy schema).
struct legacy_config {
  std::optional<legacy_scheme> global_scheme{};
  std::optional<legacy_scheme> linear_scheme_override{};
  std::optional<legacy_scheme> moe_scheme_override{};
  std::vector<std::string> ignore{};
  constexpr bool operator==(const legacy_config&) const = default;
};

/// What resolution yields: no online quantization (None), or a config of either schema. (Not a
/// std::variant: nvcc's front end cannot evaluate libstdc++'s variant of these types.)
class resolved_config {
 public:
  constexpr resolved_config() = default;
  constexpr resolved_config(const current_config& c) : which_(1), current_(c) {}
  constexpr resolved_config(const legacy_config& c) : which_(2), legacy_(c) {}
  constexpr bool is_none() const { return which_ == 0; }
  /// The config of each schema, or nullptr.
  constexpr const current_config* current() const { return which_ == 1 ? &current_ : nullptr; }
  constexpr const legacy_config* legacy() const { return which_ == 2 ? &legacy_ : nullptr; }
  constexpr bool operator==(const resolved_config&) const = default;

 private:
  std::uint8_t which_ = 0;
  current_config current_{};
  legacy_config legacy_{};
};

/// A value or the diagnostic that stopped it.
template <class T>
struct outcome {
  optional_value<T> value{};
  maybe<diagnostic> error{};
  constexpr bool ok() const { return !error.has_value(); }
};

// ---- current schema rules ----

/// A shorthand's slot for a layer kind in release r: weight set, activation unset, the shorthand's
/// rotation (none when the slot is None).
constexpr std::optional<quant_spec> shorthand_spec(shorthand s, layer_kind kind, vllm_release r) {
  const auto k = shorthand_weight(s, kind, r);
  if (!k) return std::nullopt;
  return quant_spec{*k, std::nullopt, true, false, kind == layer_kind::linear ? entry(s).linear_hadamard : 0};
}

/// The shorthand's own config (spec §3.3): its slots, no ignore, no targets.
constexpr current_config shorthand_config(shorthand s, vllm_release r) {
  current_config c;
  c.linear = shorthand_spec(s, layer_kind::linear, r);
  c.moe = shorthand_spec(s, layer_kind::moe, r);
  c.release = r;
  return c;
}

/// The slot a shorthand given as a `linear`/`moe` string fills, or the "does not define" error.
constexpr outcome<quant_spec> shorthand_slot(shorthand s, layer_kind field, vllm_release r) {
  auto slot = shorthand_spec(s, field, r);
  if (!slot)
    return {std::nullopt, diagnostic{std::string(to_string(field)),
                                     "online shorthand " + text::py_repr(to_string(s)) + " does not define a " +
                                         std::string(to_string(field)) + " spec"}};
  return {slot, std::nullopt};
}

/// repr of a validated targets dict: {'pattern': 'shorthand', 'p2': QuantSpec(...), ...}.
constexpr std::string targets_repr(const std::vector<target_rule>& targets) {
  std::string out = "{";
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (i) out += ", ";
    out += text::py_repr(targets[i].pattern) + ": ";
    if (targets[i].value) out += text::py_repr(to_string(*targets[i].value));
    else out += spec_dataclass_repr(targets[i].spec);
  }
  return out + "}";
}

/// The mutual-exclusion model error of a built config, if it applies.
constexpr maybe<diagnostic> check_mutual_exclusion(const current_config& c) {
  if (c.targets && (c.linear || c.moe))
    return diagnostic{"", "quantization_config.targets is mutually exclusive with quantization_config.linear/moe, got "
                          "targets=" + targets_repr(*c.targets) + ", linear=" + spec_str(c.linear, c.release) +
                              ", moe=" + spec_str(c.moe, c.release) + "."};
  return std::nullopt;
}

/// merge_quantization_config's merge_spec (0.34): the base's written fields, then the override's; a
/// Hadamard shorthand's weight may not change.
constexpr outcome<std::optional<quant_spec>> merge_spec(const std::optional<quant_spec>& b,
                                                        const std::optional<quant_spec>& o, vllm_release r) {
  using R = outcome<std::optional<quant_spec>>;
  if (!o) return R{b, std::nullopt};
  if (!b) return R{o, std::nullopt};
  if (b->hadamard_size && o->weight_set && o->weight != b->weight)
    return R{std::nullopt, diagnostic{"", "quantization_config cannot change the weight of a Hadamard-rotated shorthand (" +
                                              spec_str(*b, r) + " -> " + spec_str(*o, r) +
                                              "); use --quantization online and set `hadamard_size` on the spec instead."}};
  quant_spec m;
  m.weight_set = b->weight_set || o->weight_set;
  m.weight = o->weight_set ? o->weight : b->weight;
  m.activation_set = b->activation_set || o->activation_set;
  m.activation = o->activation_set ? o->activation : b->activation;
  m.hadamard_size = o->hadamard_size ? o->hadamard_size : b->hadamard_size;
  return R{std::optional<quant_spec>(m), std::nullopt};
}

/// resolve_quantization_config (spec §3.4, §9.2, §9.4) over an already built (and field-validated)
/// config of release r. `cfg` empty means quantization_config was None.
constexpr outcome<resolved_config> resolve_current(const maybe<std::string>& q, const maybe<current_config>& cfg,
                                                   vllm_release r = newest_release) {
  using R = outcome<resolved_config>;
  if (q && !is_online_name(*q, r)) {
    if (!cfg) return R{resolved_config{}, std::nullopt};
    return R{resolved_config{*cfg}, std::nullopt};
  }
  std::optional<shorthand> base_id;
  if (q) base_id = find_shorthand(*q, r);
  if (!cfg) {
    if (!base_id || entry(*base_id).deferred) return R{resolved_config{}, std::nullopt};
    return R{resolved_config{shorthand_config(*base_id, r)}, std::nullopt};
  }
  if (!base_id || (entry(*base_id).deferred && rules(r).defer_with_config)) return R{resolved_config{*cfg}, std::nullopt};
  const auto base = shorthand_config(*base_id, r);
  current_config merged;
  merged.release = r;
  if (rules(r).fields_set) {
    auto linear = merge_spec(base.linear, cfg->linear, r);
    if (linear.error) return R{std::nullopt, *linear.error};
    auto moe = merge_spec(base.moe, cfg->moe, r);
    if (moe.error) return R{std::nullopt, *moe.error};
    merged.linear = *linear.value;
    merged.moe = *moe.value;
  } else {
    merged.linear = cfg->linear ? cfg->linear : base.linear;  // a spec object is always true
    merged.moe = cfg->moe ? cfg->moe : base.moe;
  }
  merged.ignore = cfg->ignore.empty() ? base.ignore : cfg->ignore;
  if (cfg->targets && !cfg->targets->empty()) merged.targets = cfg->targets;
  if (auto e = check_mutual_exclusion(merged)) return R{std::nullopt, *e};
  return R{resolved_config{merged}, std::nullopt};
}

/// Where release r does something a user would not expect from the arguments, a sentence saying what
/// vLLM will do (the decision stays the release's): 0.30-0.33 replace a shorthand's slot with a spec
/// that has no weight, and read `weight: "mxfp4"` as the dynamic key no method takes; 0.34 ignores
/// the defaults of `-q mxfp4|mxfp8` given with a config.
constexpr std::vector<std::string> surprising_release_behaviour(const maybe<std::string>& q, const maybe<current_config>& cfg,
                                                                vllm_release r) {
  std::vector<std::string> out;
  if (!cfg) return out;
  const std::string release(to_string(r));
  // A plain flag and id, not an optional: GCC 12 warns falsely (maybe-uninitialized) on the optional here.
  bool has_base = false;
  shorthand base{};
  if (q)
    if (const auto found = find_shorthand(*q, r)) {
      has_base = true;
      base = *found;
    }
  if (has_base && entry(base).deferred && rules(r).defer_with_config)
    out.push_back("vLLM " + release + " returns quantization_config unmerged for quantization=" + text::py_repr(*q) +
                  " (also a checkpoint method): the shorthand's own " + std::string(to_string(base)) +
                  " specs apply only where vLLM finds the checkpoint unquantized, so this plan holds the config alone; "
                  "write the specs in the config (or use quantization='online') to quantize those layers");
  for (const auto kind : {layer_kind::linear, layer_kind::moe}) {
    const auto& spec = kind == layer_kind::linear ? cfg->linear : cfg->moe;
    const std::string field(to_string(kind));
    if (!spec) continue;
    if (!rules(r).fields_set && has_base && shorthand_spec(base, kind, r) && !spec->weight)
      out.push_back("vLLM " + release + " replaces the " + field + " spec of quantization=" + text::py_repr(*q) +
                    " with the one given (its `or` merge), which has no weight: " + field +
                    " layers stay unquantized" + (spec->activation ? " and the activation is not used" : "") +
                    "; vLLM 0.34 merges field by field. Give the weight too to keep them quantized");
    if (!rules(r).weight_only_names && spec->weight == key_id::mxfp4_dynamic)
      out.push_back("in vLLM " + release + ", " + field + ".weight 'mxfp4' is the dynamic MXFP4 key, which no online " +
                    "method takes: " + field + " layers fail. The shorthand (\"" + field +
                    "\": \"mxfp4\") gives MXFP4 static; vLLM 0.34 reads 'mxfp4' as the static key in a weight");
  }
  return out;
}

/// OnlineQuantizationConfig's "at least one" check (spec §3.5, §5).
constexpr maybe<diagnostic> check_online_config(const resolved_config& r) {
  if (auto c = r.current(); c && !c->linear && !c->moe && !c->targets)
    return diagnostic{"", "OnlineQuantizationConfig requires at least one of quantization_config.linear, "
                          "quantization_config.moe, or quantization_config.targets to be set."};
  if (auto l = r.legacy(); l && !l->global_scheme && !l->linear_scheme_override && !l->moe_scheme_override)
    return diagnostic{"", "OnlineQuantizationConfig requires at least one of global_scheme, linear_scheme_override, "
                          "or moe_scheme_override to be set."};
  return std::nullopt;
}

// ---- legacy schema rules ----

constexpr bool is_legacy_online_name(std::string_view q) {
  return q == "online" || find_legacy_scheme(q).has_value();
}

constexpr std::string legacy_only_supported_message(const maybe<std::string>& q) {
  std::string out = "quantization_config is only supported when quantization is one of " + legacy_online_names_repr() +
                    ", got quantization=";
  if (q) out += text::py_repr(*q);
  else out += "None";
  return out;
}

constexpr std::string legacy_not_a_scheme_message(std::string_view repr_of_value) {
  return std::string(repr_of_value) + " is not a valid OnlineQuantScheme";
}

constexpr std::string legacy_conflict_message(std::string_view q, std::string_view repr_of_existing) {
  return "quantization=" + text::py_repr(q) + " conflicts with quantization_config['global_scheme']=" +
         std::string(repr_of_existing) + ". These must match when both are specified.";
}

/// quantization_config['global_scheme'] as given, before validation.
struct legacy_global_field {
  enum class kind : std::uint8_t { absent, scheme, other_string, other_value } what = kind::absent;
  legacy_scheme scheme{};
  std::string repr{};  // Python repr of the value (other_*)
};

/// resolve_online_quant_config's checks of `quantization` against the config (spec §3.5), in vLLM's
/// order: a config needs an online quantization; a named scheme must agree with global_scheme.
constexpr maybe<diagnostic> check_legacy_quantization(const maybe<std::string>& q, bool has_config,
                                                              const legacy_global_field& global) {
  if (!q || !is_legacy_online_name(*q)) {
    if (has_config) return diagnostic{"", legacy_only_supported_message(q)};
    return std::nullopt;
  }
  if (*q == "online" || !has_config) return std::nullopt;
  using k = legacy_global_field::kind;
  if (global.what == k::other_string) return diagnostic{"", legacy_not_a_scheme_message(global.repr)};
  if (global.what == k::other_value) return diagnostic{"", legacy_conflict_message(*q, global.repr)};
  if (global.what == k::scheme && to_string(global.scheme) != *q)
    return diagnostic{"", legacy_conflict_message(*q, text::py_repr(to_string(global.scheme)))};
  return std::nullopt;
}

/// The legacy config after the checks: `quantization`'s scheme fills an absent global_scheme; no
/// config and no scheme resolves to None.
constexpr resolved_config resolve_legacy_values(const maybe<std::string>& q, maybe<legacy_config> cfg) {
  if (!q || !is_legacy_online_name(*q)) return {};
  if (*q != "online") {
    if (!cfg) cfg = legacy_config{};
    if (!cfg->global_scheme) cfg->global_scheme = find_legacy_scheme(*q);
  }
  if (!cfg) return {};
  return resolved_config{*cfg};
}

// ---- field messages shared by both front ends ----

constexpr std::string unknown_quantization_name_message(std::string_view repr_of_value, vllm_release r) {
  return "unknown quantization name " + std::string(repr_of_value) + "; expected one of " + quant_key_names_repr(r);
}

constexpr std::string targets_not_shorthand_message(std::string_view pattern, std::string_view str_of_value, vllm_release r) {
  return "targets[" + std::string(pattern) + "] = " + std::string(str_of_value) +
         " is not a valid online shorthand name; expected one of " + shorthand_names_repr(r);
}

constexpr std::string targets_not_spec_message(std::string_view pattern, std::string_view type_name) {
  return "targets[" + std::string(pattern) + "] must be an online shorthand name or a quantization spec, got " +
         std::string(type_name);
}

constexpr std::string hadamard_not_power_of_two_message(std::string_view value) {
  return "hadamard_size must be a power of two, got " + std::string(value);
}

constexpr std::string targets_bad_regex_message(std::string_view pattern, std::string_view error) {
  return "targets key " + std::string(pattern) + " is not a valid regex: " + std::string(error);
}

}  // namespace qpolicy
