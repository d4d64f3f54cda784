// JSON front end for configurations: builds QuantizationConfigArgs / OnlineQuantizationConfigArgs from
// JSON with pydantic's field-error collection and aborts, then applies the shared resolve rules.
#include <boost/json.hpp>

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

/// Reads JSON values into the shared field rules (config/field_rules.hpp); what is JSON-only stays
/// here: value types, unknown keys, aborts.
class builder {
 public:
  explicit builder(const json_text::document& doc) : doc_(doc) {}
  field_errors errors;

  void field_error(const std::string& loc, const std::string& message) { errors.add(loc, message); }

  std::optional<key_id> spec_field(const bj::value& v, const std::string& loc, key_field field) {
    if (v.is_null()) return std::nullopt;
    if (!v.is_string()) throw abort_error{"expected str or QuantKey, got " + doc_.py_type(v)};
    return spec_field_key(errors, loc, sv(v.get_string()), field);
  }

  std::optional<quant_spec> spec(const bj::object& obj, const bj::string_view name) {
    const std::string field(sv(name));
    const auto* v = obj.if_contains(name);
    if (!v || v->is_null()) return std::nullopt;
    if (v->is_string())
      return spec_from_name(errors, field == "linear" ? layer_kind::linear : layer_kind::moe, sv(v->get_string()));
    if (!v->is_object()) {
      field_error(field, "Input should be a dictionary or an instance of QuantSpec");
      return std::nullopt;
    }
    const auto& o = v->get_object();
    quant_spec s;
    if (const auto* w = o.if_contains("weight")) {
      s.weight_set = true;
      s.weight = spec_field(*w, field + ".weight", key_field::weight);
    }
    if (const auto* a = o.if_contains("activation")) {
      s.activation_set = true;
      s.activation = spec_field(*a, field + ".activation", key_field::activation);
    }
    for (const auto& kv : o)
      if (kv.key() != "weight" && kv.key() != "activation")
        field_error(field + "." + std::string(sv(kv.key())), "Unexpected keyword argument");
    return s;
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

  maybe<std::vector<target_rule>> targets(const bj::object& obj) {
    const auto* v = obj.if_contains("targets");
    if (!v || v->is_null()) return std::nullopt;
    if (!v->is_object()) throw abort_error{"targets must be a dict, got " + doc_.py_type(*v)};
    std::vector<target_rule> out;
    for (const auto& kv : v->get_object()) {
      const std::string pattern(sv(kv.key()));
      const bool is_string = kv.value().is_string();
      const auto sh = target_value(errors, pattern, is_string, is_string ? sv(kv.value().get_string()) : std::string_view(),
                                   doc_.py_str(kv.value()));
      if (!sh) return out;
      out.push_back({pattern, *sh});
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
};

current_config build_current(const json_text::document& doc, const bj::object& obj) {
  builder b(doc);
  current_config c;
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
  builder b(doc);
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
  if (cfg) built = build_current(doc, *cfg);
  auto r = resolve_current(q, built);
  if (r.error) throw config_error(*r.error);
  out.config = std::move(*r.value);
  if (q && !cfg) {
    if (auto sh = find_shorthand(*q); sh && entry(*sh).deferred)
      out.warnings.push_back("quantization=" + text::py_repr(*q) +
                             " without a quantization_config is a checkpoint method: the checkpoint's own "
                             "quantization config decides (no online quantization)");
  }
  return out;
}

std::string resolved_to_json(const resolved_config& config) {
  bj::value out;
  auto key_or_null = [](const std::optional<key_id>& k) -> bj::value {
    return k ? bj::value(key_name(*k)) : bj::value(nullptr);
  };
  if (const auto* c = config.current()) {
    auto spec = [&](const std::optional<quant_spec>& s) -> bj::value {
      if (!s) return nullptr;
      bj::object o;
      if (s->weight_set) o["weight"] = key_or_null(s->weight);
      if (s->activation_set) o["activation"] = key_or_null(s->activation);
      return o;
    };
    bj::object o;
    o["linear"] = spec(c->linear);
    o["moe"] = spec(c->moe);
    bj::array ign;
    for (const auto& p : c->ignore) ign.emplace_back(p);
    o["ignore"] = std::move(ign);
    if (c->targets) {
      bj::object t;
      for (const auto& r : *c->targets) t[r.pattern] = std::string(to_string(r.value));
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
