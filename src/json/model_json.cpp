// MODEL.json reader (cli.md): strict about fields, kinds, names and sizes, fast on 100k layers.
#include <boost/json.hpp>
#include <unordered_map>

#include "json_text.hpp"
#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/model/detail/model_rules.hpp"

namespace qpolicy {

namespace {

namespace bj = boost::json;

using json_text::sv;

[[noreturn]] void bad(const std::string& loc, const std::string& message) {
  throw config_error(loc, message + " in the model file");
}

std::string expect_string(const json_text::document& doc, const bj::value& v, const std::string& loc) {
  if (!v.is_string()) bad(loc, "expected a string, got " + doc.py_type(v) + " " + doc.py_repr(v));
  return std::string(sv(v.get_string()));
}

std::int64_t expect_size(const json_text::document& doc, const bj::value& v, const std::string& loc) {
  if (v.is_int64() && v.get_int64() > 0) return v.get_int64();
  if (v.is_uint64() && v.get_uint64() <= static_cast<std::uint64_t>(INT64_MAX) && v.get_uint64() > 0)
    return static_cast<std::int64_t>(v.get_uint64());
  bad(loc, "expected a positive integer, got " + doc.py_type(v) + " " + doc.py_repr(v));
}

std::vector<std::int64_t> expect_sizes(const json_text::document& doc, const bj::value& v, const std::string& loc, std::size_t exact) {
  if (!v.is_array()) bad(loc, "expected a list of positive integers, got " + doc.py_type(v));
  const auto& a = v.get_array();
  if (exact && a.size() != exact)
    bad(loc, "expected " + std::to_string(exact) + " sizes [out_features, in_features], got " + std::to_string(a.size()));
  if (a.empty()) bad(loc, "expected at least one size, got an empty list");
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(expect_size(doc, a[i], loc + "." + std::to_string(i)));
  return out;
}

layer_desc parse_layer(const json_text::document& doc, const bj::value& v, const std::string& loc) {
  if (!v.is_object()) bad(loc, "expected a layer object, got " + doc.py_type(v));
  layer_desc l;
  bool has_name = false, has_class = false, has_kind = false;
  for (const auto& kv : v.get_object()) {
    const auto key = sv(kv.key());
    const std::string at = loc + "." + std::string(key);
    const auto& val = kv.value();
    if (key == "name") { l.name = expect_string(doc, val, at); has_name = true; }
    else if (key == "class") { l.class_name = expect_string(doc, val, at); has_class = true; }
    else if (key == "kind") {
      const auto k = expect_string(doc, val, at);
      const auto kind = find_layer_kind(k);
      if (!kind) bad(at, unknown_layer_kind_message(k));
      l.kind = *kind;
      has_kind = true;
    } else if (key == "quantizable") {
      if (!val.is_bool()) bad(at, "expected true or false, got " + doc.py_type(val) + " " + doc.py_repr(val));
      l.quantizable = val.get_bool();
    } else if (key == "bias") {
      if (!val.is_bool()) bad(at, "expected true or false, got " + doc.py_type(val) + " " + doc.py_repr(val));
      l.bias = val.get_bool();
    } else if (key == "shape") l.shape = expect_sizes(doc, val, at, 2);
    else if (key == "shard_sizes") l.shard_sizes = expect_sizes(doc, val, at, 0);
    else if (key == "num_experts") l.num_experts = expect_size(doc, val, at);
    else if (key == "hidden_size") l.hidden_size = expect_size(doc, val, at);
    else if (key == "intermediate_size") l.intermediate_size = expect_size(doc, val, at);
    else bad(at, "unknown field " + text::py_repr(key) + "; a layer has " + join_names(layer_field_names));
  }
  if (!has_name) bad(loc, "layer has no \"name\"");
  if (!has_class) bad(loc, "layer " + text::py_repr(l.name) + " has no \"class\"");
  if (!has_kind) bad(loc, "layer " + text::py_repr(l.name) + " has no \"kind\"");
  if (l.name.empty()) bad(loc + ".name", std::string(empty_layer_name_message));
  if (l.class_name.empty()) bad(loc + ".class", std::string(empty_layer_class_message));
  if (!l.shard_sizes.empty() && l.shape.size() == 2)
    if (auto why = shard_sum_problem(l.shard_sizes, l.shape[0]); !why.empty()) bad(loc + ".shard_sizes", why);
  return l;
}

}  // namespace

model_desc parse_model(std::string_view text, json_dialect dialect) {
  std::vector<json_text::duplicate_key> dups;
  const auto doc = json_text::parse(text, dialect, "the model file", &dups);
  const auto& v = doc.root();
  if (!dups.empty())
    bad(dups.front().loc.empty() ? dups.front().key : dups.front().loc + "." + dups.front().key,
        "duplicate key " + text::py_repr(dups.front().key));
  if (!v.is_object()) bad("", "expected a JSON object with \"layers\", got " + doc.py_type(v));
  model_desc m;
  bool has_layers = false;
  for (const auto& kv : v.get_object()) {
    const auto key = sv(kv.key());
    const std::string at(key);
    const auto& val = kv.value();
    if (key == "name") m.name = expect_string(doc, val, at);
    else if (key == "packed_modules_mapping") {
      if (!val.is_object()) bad(at, "expected an object {fused: [shards]}, got " + doc.py_type(val));
      for (const auto& p : val.get_object()) {
        const std::string ploc = at + "." + std::string(sv(p.key()));
        if (!p.value().is_array()) bad(ploc, "expected a list of shard names, got " + doc.py_type(p.value()));
        packed_mapping pm{std::string(sv(p.key())), {}};
        const auto& shards = p.value().get_array();
        for (std::size_t i = 0; i < shards.size(); ++i) {
          pm.shards.push_back(expect_string(doc, shards[i], ploc + "." + std::to_string(i)));
          if (pm.shards.back().empty()) bad(ploc + "." + std::to_string(i), "shard name is empty");
        }
        m.packed.push_back(std::move(pm));
      }
    } else if (key == "layers") {
      if (!val.is_array()) bad(at, "expected a list of layers, got " + doc.py_type(val));
      has_layers = true;
      const auto& arr = val.get_array();
      m.layers.reserve(arr.size());
      std::unordered_map<std::string_view, std::size_t> seen;
      seen.reserve(arr.size());
      for (std::size_t i = 0; i < arr.size(); ++i) m.layers.push_back(parse_layer(doc, arr[i], "layers." + std::to_string(i)));
      for (std::size_t i = 0; i < m.layers.size(); ++i) {
        auto [it, fresh] = seen.emplace(m.layers[i].name, i);
        if (!fresh)
          bad("layers." + std::to_string(i) + ".name", "duplicate layer name " + text::py_repr(m.layers[i].name) +
                                                          " (first at layers." + std::to_string(it->second) + ")");
      }
    } else {
      bad(at, "unknown field " + text::py_repr(key) + "; a model file has " + join_names(model_field_names));
    }
  }
  if (!has_layers) bad("", "the model file has no \"layers\" list");
  return m;
}

}  // namespace qpolicy
