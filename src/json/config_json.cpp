// JSON front end for configurations: builds QuantizationConfigArgs / OnlineQuantizationConfigArgs from
// JSON with pydantic's field-error collection and aborts, then applies the shared resolve rules.
#include <boost/json.hpp>

#include <cmath>

#include "json_text.hpp"
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/config/detail/field_rules.hpp"

namespace qpolicy {

namespace {

namespace bj = boost::json;

using json_text::sv;

/// An abort (spec §1.2): stops validation, discards collected field errors.
struct abort_error {
  std::string message;
};

/// Reads JSON values into the shared field rules (config/field_rules.hpp) under one release's rules;
/// what is JSON-only stays here: value types, unknown keys, aborts.
class builder {
 public:
  builder(const json_text::document& doc, vllm_release release) : doc_(doc), release_(release) {}
  field_errors errors;

  void field_error(const std::string& loc, const std::string& message) { errors.add(loc, message); }

  std::optional<key_id> spec_field(const bj::value& v, const std::string& loc, key_field field) {
    if (v.is_null()) return std::nullopt;
    if (!v.is_string()) throw abort_error{"expected str or QuantKey, got " + doc_.py_type(v)};
    return spec_field_key(errors, loc, sv(v.get_string()), field, release_);
  }

  /// QuantSpec(**o) (spec §3.1, §9.4): the fields the release has, in declaration order, then the
  /// unknown keys. `loc` prefixes each field's location.
  quant_spec spec_object(const bj::object& o, const std::string& loc) {
    const bool hadamard = rules(release_).hadamard_size;
    quant_spec s;
    auto at = [&](std::string_view field) { return loc.empty() ? std::string(field) : loc + "." + std::string(field); };
    if (const auto* w = o.if_contains("weight")) {
      s.weight_set = true;
      s.weight = spec_field(*w, at("weight"), key_field::weight);
    }
    if (const auto* a = o.if_contains("activation")) {
      s.activation_set = true;
      s.activation = spec_field(*a, at("activation"), key_field::activation);
    }
    if (const auto* h = o.if_contains("hadamard_size"); hadamard && h) s.hadamard_size = hadamard_size(*h, at("hadamard_size"));
    for (const auto& kv : o)
      if (kv.key() != "weight" && kv.key() != "activation" && !(hadamard && kv.key() == "hadamard_size"))
        field_error(at(sv(kv.key())), "Unexpected keyword argument");
    return s;
  }

  std::optional<quant_spec> spec(const bj::object& obj, const bj::string_view name) {
    const std::string field(sv(name));
    const auto* v = obj.if_contains(name);
    if (!v || v->is_null()) return std::nullopt;
    if (v->is_string())
      return spec_from_name(errors, field == "linear" ? layer_kind::linear : layer_kind::moe, sv(v->get_string()), release_);
    if (!v->is_object()) {
      field_error(field, "Input should be a dictionary or an instance of QuantSpec");
      return std::nullopt;
    }
    return spec_object(v->get_object(), field);
  }

  std::vector<std::string> ignore(const bj::object& obj) {
    std::vector<std::string> out;
    const auto* v = obj.if_contains("ignore");
    if (!v) return out;
    if (!v->is_array()) {
      field_error("ignore", "Input should be a valid list");
      return out;
    }
    const auto& arr = v->get_array();
    for (std::size_t i = 0; i < arr.size(); ++i) {
      if (arr[i].is_string()) out.emplace_back(sv(arr[i].get_string()));
      else field_error("ignore." + std::to_string(i), "Input should be a valid string");
    }
    return out;
  }

  /// `targets` (spec §3.2, §9.4): entries in order, the first failure wins. A spec value's own field
  /// errors are located at `targets.FIELD`, as pydantic re-raises them.
  maybe<std::vector<target_rule>> targets(const bj::object& obj) {
    const auto* v = obj.if_contains("targets");
    if (!v || v->is_null()) return std::nullopt;
    if (!v->is_object()) throw abort_error{"targets must be a dict, got " + doc_.py_type(*v)};
    std::vector<target_rule> out;
    for (const auto& kv : v->get_object()) {
      const std::string pattern(sv(kv.key()));
      const auto& value = kv.value();
      target_rule rule{pattern, std::nullopt, {}};
      if (!rules(release_).spec_targets || value.is_string()) {
        const bool is_string = value.is_string();
        rule.value = target_shorthand(errors, pattern, is_string, is_string ? sv(value.get_string()) : std::string_view(),
                                      doc_.py_str(value), release_);
        if (!rule.value) return out;
      } else if (value.is_object()) {
        const auto before = errors.errors.size();
        rule.spec = spec_object(value.get_object(), "targets");
        if (errors.errors.size() != before) return out;
      } else {
        field_error("targets", targets_not_spec_message(pattern, doc_.py_type(value)));
        return out;
      }
      if (!target_pattern(errors, pattern)) return out;
      out.push_back(std::move(rule));
    }
    return out;
  }

  void unknown_keys(const bj::object& obj, std::initializer_list<std::string_view> known) {
    for (const auto& kv : obj) {
      bool ok = false;
      for (auto k : known) ok |= sv(kv.key()) == k;
      if (!ok) field_error(std::string(sv(kv.key())), "Unexpected keyword argument");
    }
  }

  void raise_field_errors() {
    if (!errors.errors.empty()) throw config_errors(errors.errors);
  }

 private:
  const json_text::document& doc_;
  vllm_release release_;

  /// pydantic's lax int (JSON numbers, bools and numeric strings), then the power-of-two rule.
  std::int64_t hadamard_size(const bj::value& h, const std::string& loc) {
    constexpr std::int64_t largest = std::int64_t{1} << 62;
    auto too_large = [&](const std::string& digits) {
      field_error(loc, "hadamard_size " + digits + " is larger than qpolicy supports (at most " +
                           text::to_decimal(static_cast<long long>(largest)) + ")");
      return std::int64_t{0};
    };
    if (h.is_null()) return 0;
    if (h.is_bool()) return hadamard_field(errors, loc, h.get_bool() ? 1 : 0);
    if (h.is_int64()) return hadamard_field(errors, loc, h.get_int64());
    if (h.is_uint64()) return too_large(std::to_string(h.get_uint64()));  // beyond int64: 2**63 and up
    if (h.is_double()) {
      if (doc_.py_type(h) == "int") {  // an integer literal beyond 64 bits: a power of two only if it is one
        const double d = h.get_double();
        if (d > 0 && std::frexp(d, nullptr) == 0.5) return too_large(doc_.py_repr(h));
        field_error(loc, hadamard_not_power_of_two_message(doc_.py_repr(h)));
        return 0;
      }
      const double d = h.get_double();
      if (!std::isfinite(d)) return field_error(loc, "Input should be a finite number"), 0;
      if (d != std::trunc(d)) return field_error(loc, "Input should be a valid integer, got a number with a fractional part"), 0;
      if (std::fabs(d) > static_cast<double>(largest)) return too_large(json_text::py_float_repr(d));
      return hadamard_field(errors, loc, static_cast<std::int64_t>(d));
    }
    if (h.is_string()) {
      if (auto n = parse_int_text(sv(h.get_string()))) return hadamard_field(errors, loc, *n);
      field_error(loc, "Input should be a valid integer, unable to parse string as an integer");
      return 0;
    }
    field_error(loc, "Input should be a valid integer");
    return 0;
  }

  /// pydantic's str -> int: surrounding whitespace, a sign, digits with single underscores between
  /// them, and a fraction of zeros. nullopt when it is not one (or is beyond 2**62).
  static std::optional<std::int64_t> parse_int_text(std::string_view t) {
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
    while (!t.empty() && space(t.front())) t.remove_prefix(1);
    while (!t.empty() && space(t.back())) t.remove_suffix(1);
    bool negative = false;
    if (!t.empty() && (t.front() == '+' || t.front() == '-')) {
      negative = t.front() == '-';
      t.remove_prefix(1);
    }
    if (const auto dot = t.find('.'); dot != std::string_view::npos) {
      for (char c : t.substr(dot + 1))
        if (c != '0') return std::nullopt;
      t = t.substr(0, dot);
    }
    if (t.empty() || t.front() == '_' || t.back() == '_') return std::nullopt;
    std::int64_t n = 0;
    char previous = 0;
    for (char c : t) {
      if (c == '_') {
        if (previous == '_') return std::nullopt;
      } else if (c >= '0' && c <= '9') {
        if (n > (std::int64_t{1} << 62) / 10) return std::nullopt;
        n = n * 10 + (c - '0');
      } else {
        return std::nullopt;
      }
      previous = c;
    }
    return negative ? -n : n;
  }
};

current_config build_current(const json_text::document& doc, const bj::object& obj, vllm_release release) {
  builder b(doc, release);
  current_config c;
  c.release = release;
  try {
    c.linear = b.spec(obj, "linear");
    c.moe = b.spec(obj, "moe");
    c.ignore = b.ignore(obj);
    c.targets = b.targets(obj);
  } catch (const abort_error& e) {
    throw config_error("", e.message);
  }
  b.unknown_keys(obj, {"linear", "moe", "ignore", "targets"});
  b.raise_field_errors();
  if (auto e = check_mutual_exclusion(c)) throw config_error(*e);
  return c;
}

std::optional<legacy_scheme> legacy_field(builder& b, const bj::object& obj, bj::string_view name) {
  const auto* v = obj.if_contains(name);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_string()) {
    b.field_error(std::string(sv(name)), legacy_scheme_type_message());
    return std::nullopt;
  }
  return legacy_scheme_field(b.errors, std::string(sv(name)), sv(v->get_string()));
}

legacy_config build_legacy(const json_text::document& doc, const bj::object& obj) {
  builder b(doc, newest_release);
  legacy_config c;
  c.global_scheme = legacy_field(b, obj, "global_scheme");
  c.linear_scheme_override = legacy_field(b, obj, "linear_scheme_override");
  c.moe_scheme_override = legacy_field(b, obj, "moe_scheme_override");
  c.ignore = b.ignore(obj);
  b.unknown_keys(obj, {"global_scheme", "linear_scheme_override", "moe_scheme_override", "ignore"});
  b.raise_field_errors();
  return c;
}

resolved_config resolve_legacy(const maybe<std::string>& q, const json_text::document& doc, const bj::object* cfg) {
  legacy_global_field global;
  if (cfg)
    if (const auto* existing = cfg->if_contains("global_scheme"); existing && !existing->is_null())
      global = existing->is_string()
                   ? classify_legacy_global(sv(existing->get_string()))
                   : legacy_global_field{legacy_global_field::kind::other_value, {}, doc.py_repr(*existing)};
  if (auto e = check_legacy_quantization(q, cfg != nullptr, global)) throw config_error(*e);
  maybe<legacy_config> built;
  if (cfg && q && is_legacy_online_name(*q)) built = build_legacy(doc, *cfg);
  return resolve_legacy_values(q, std::move(built));
}

}  // namespace

resolution resolve(const config_request& request) {
  resolution out;
  json_text::document doc;
  const bj::object* cfg = nullptr;
  if (request.config_text) {
    std::vector<json_text::duplicate_key> dups;
    doc = json_text::parse(*request.config_text, request.dialect, "quantization_config", &dups);
    for (const auto& d : dups)
      out.warnings.push_back("duplicate key " + text::py_repr(d.key) + " in quantization_config" +
                             (d.loc.empty() ? std::string() : " at " + d.loc) +
                             ": the last value wins at the first key's position (as in Python)");
    const auto& v = doc.root();
    if (v.is_object()) {
      cfg = &v.get_object();
    } else if (!v.is_null()) {
      // vLLM's legacy resolver checks `quantization` before it reads the config (spec §5, step 1).
      if (request.legacy)
        if (auto e = check_legacy_quantization(request.quantization, true, {})) throw config_error(*e);
      throw config_error("", "quantization_config must be a JSON object or null, got " + doc.py_type(v));
    }
  }
  const auto& q = request.quantization;
  if (request.legacy) {
    out.config = resolve_legacy(q, doc, cfg);
    return out;
  }
  maybe<current_config> built;
  if (cfg) built = build_current(doc, *cfg, request.release);
  for (auto& w : surprising_release_behaviour(q, built, request.release)) out.warnings.push_back(std::move(w));
  auto r = resolve_current(q, built, request.release);
  if (r.error) throw config_error(*r.error);
  out.config = std::move(*r.value);
  if (q && !cfg) {
    if (auto sh = find_shorthand(*q, request.release); sh && entry(*sh).deferred)
      out.warnings.push_back("quantization=" + text::py_repr(*q) +
                             " without a quantization_config is a checkpoint method: the checkpoint's own "
                             "quantization config decides (no online quantization)");
  }
  return out;
}

std::string resolved_to_json(const resolved_config& config) {
  bj::value out;
  if (const auto* c = config.current()) {
    const auto release = c->release;
    auto key_or_null = [&](const std::optional<key_id>& k) -> bj::value {
      return k ? bj::value(key_name(*k, release)) : bj::value(nullptr);
    };
    // 0.34: the fields written (fields_set), an explicit null included; before: the non-None fields.
    const bool written = rules(release).fields_set;
    auto spec_object = [&](const quant_spec& s) {
      bj::object o;
      if (written ? s.weight_set : s.weight.has_value()) o["weight"] = key_or_null(s.weight);
      if (written ? s.activation_set : s.activation.has_value()) o["activation"] = key_or_null(s.activation);
      if (s.hadamard_size) o["hadamard_size"] = s.hadamard_size;
      return o;
    };
    auto spec = [&](const std::optional<quant_spec>& s) -> bj::value {
      if (!s) return nullptr;
      return spec_object(*s);
    };
    bj::object o;
    o["linear"] = spec(c->linear);
    o["moe"] = spec(c->moe);
    bj::array ign;
    for (const auto& p : c->ignore) ign.emplace_back(p);
    o["ignore"] = std::move(ign);
    if (c->targets) {
      bj::object t;
      for (const auto& r : *c->targets) {
        if (r.value) t[r.pattern] = std::string(to_string(*r.value));
        else t[r.pattern] = spec_object(r.spec);
      }
      o["targets"] = std::move(t);
    } else {
      o["targets"] = nullptr;
    }
    out = std::move(o);
  } else if (const auto* l = config.legacy()) {
    auto scheme = [](const std::optional<legacy_scheme>& s) -> bj::value {
      return s ? bj::value(std::string(to_string(*s))) : bj::value(nullptr);
    };
    bj::object o;
    o["global_scheme"] = scheme(l->global_scheme);
    o["linear_scheme_override"] = scheme(l->linear_scheme_override);
    o["moe_scheme_override"] = scheme(l->moe_scheme_override);
    bj::array ign;
    for (const auto& p : l->ignore) ign.emplace_back(p);
    o["ignore"] = std::move(ign);
    out = std::move(o);
  }
  return json_text::serialize(out);
}

}  // namespace qpolicy
