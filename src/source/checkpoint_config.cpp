// A quantized checkpoint's quantization_config read into a checkpoint_source (checkpoint_source.hpp):
// every field the layer rules and the stored-tensor checks use, validated before any of them runs, with
// vLLM's text where vLLM refuses the value and a sentence naming the field, the value and what was
// expected where vLLM would fail later (a ZeroDivisionError, a tensor of negative size).
// compressed-tensors' QuantizationArgs are checked as its pydantic model validates them (quant_args.py),
// which vLLM runs on every config group.
#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "qpolicy/config/config.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/source/checkpoint_source.hpp"
#include "config_fields.hpp"

namespace qpolicy::source {

namespace detail {

namespace json = boost::json;

std::string py_type(const json::value& v) {
  if (v.is_string()) return "<class 'str'>";
  if (v.is_bool()) return "<class 'bool'>";
  if (v.is_int64() || v.is_uint64()) return "<class 'int'>";
  if (v.is_double()) return "<class 'float'>";
  if (v.is_object()) return "<class 'dict'>";
  if (v.is_array()) return "<class 'list'>";
  return "<class 'NoneType'>";
}

std::string py_value_repr(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "None";
    case json::kind::bool_: return v.get_bool() ? "True" : "False";
    case json::kind::int64: return std::to_string(v.get_int64());
    case json::kind::uint64: return std::to_string(v.get_uint64());
    case json::kind::double_: {
      const double d = v.get_double();
      if (std::isnan(d)) return "nan";
      if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
      auto t = fmt::format("{}", d);
      if (t.find_first_of(".en") == std::string::npos) t += ".0";  // Python's repr keeps a float's point
      return t;
    }
    case json::kind::string: return text::py_repr(std::string_view(v.get_string()));
    case json::kind::array: {
      std::string out = "[";
      for (const auto& e : v.get_array()) out += (out.size() > 1 ? ", " : "") + py_value_repr(e);
      return out + "]";
    }
    case json::kind::object: {
      std::string out = "{";
      for (const auto& [k, e] : v.get_object())
        out += (out.size() > 1 ? ", " : "") + text::py_repr(std::string_view(k)) + ": " + py_value_repr(e);
      return out + "}";
    }
  }
  return "None";
}

std::string quoted(const json::value& v) {
  if (v.is_string()) return text::py_repr(std::string_view(v.get_string()));
  return json::serialize(v);
}

void refuse(const std::string& field, const json::value& v, std::string_view expected) {
  throw config_error("", field + " is " + quoted(v) + "; expected " + std::string(expected));
}

bool truthy(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return false;
    case json::kind::bool_: return v.get_bool();
    case json::kind::int64: return v.get_int64() != 0;
    case json::kind::uint64: return v.get_uint64() != 0;
    case json::kind::double_: return v.get_double() != 0.0;
    case json::kind::string: return !v.get_string().empty();
    case json::kind::array: return !v.get_array().empty();
    case json::kind::object: return !v.get_object().empty();
  }
  return false;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<std::int64_t> integer(const json::value& v) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64() && v.get_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(v.get_uint64());
  return std::nullopt;
}

std::optional<std::int64_t> integer_text(std::string_view t) {
  const std::size_t sign = !t.empty() && (t[0] == '-' || t[0] == '+');
  if (t.size() <= sign || t.size() > 18 || !std::all_of(t.begin() + static_cast<std::ptrdiff_t>(sign), t.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(std::string(t));
}

std::optional<std::int64_t> python_int(const json::value& v) {
  if (const auto i = integer(v)) return i;
  if (v.is_bool()) return v.get_bool() ? 1 : 0;  // Python's bool is an int
  if (v.is_double() && std::isfinite(v.get_double()) && std::abs(v.get_double()) < 1e18) return static_cast<std::int64_t>(v.get_double());  // truncated
  if (!v.is_string()) return std::nullopt;
  std::string_view t = v.get_string();
  const auto first = t.find_first_not_of(" \t\n");
  if (first == std::string_view::npos) return std::nullopt;
  t = t.substr(first, t.find_last_not_of(" \t\n") - first + 1);
  return integer_text(t);
}

std::vector<std::string> string_list(const json::object& o, std::string_view key, std::string_view where) {
  std::vector<std::string> out;
  const auto* v = o.if_contains(key);
  if (!v || v->is_null()) return out;
  const auto field = std::string(where) + "." + std::string(key);
  if (!v->is_array()) refuse(field, *v, "a list of module names");
  for (const auto& e : v->get_array()) {
    if (!e.is_string()) throw config_error("", field + " holds " + quoted(e) + "; expected module names (strings)");
    out.emplace_back(e.get_string());
  }
  return out;
}

std::string optional_string(const json::object& o, std::string_view key, const std::string& where, std::string_view expected) {
  const auto* v = o.if_contains(key);
  if (!v || v->is_null()) return "";
  if (!v->is_string()) refuse(where + "." + std::string(key), *v, expected);
  return std::string(v->get_string());
}

const json::value& required(const json::object& o, std::string_view key) {
  if (const auto* v = o.if_contains(key)) return *v;
  throw config_error("", "Cannot find any of ['" + std::string(key) + "'] in the model's quantization config.");
}

std::string canonical_json(const json::value& v) {
  if (v.is_array()) {
    std::string out = "[";
    for (const auto& e : v.get_array()) out += (out.size() > 1 ? "," : "") + canonical_json(e);
    return out + "]";
  }
  if (!v.is_object()) return json::serialize(v);
  std::vector<std::pair<std::string_view, const json::value*>> entries;
  for (const auto& [k, e] : v.get_object()) entries.emplace_back(k, &e);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out = "{";
  for (const auto& [k, e] : entries) out += (out.size() > 1 ? "," : "") + json::serialize(json::value(k)) + ":" + canonical_json(*e);
  return out + "}";
}

}  // namespace detail

namespace {

namespace json = boost::json;
using namespace detail;

/// An int as pydantic's lax mode reads one: a JSON integer, a float without a fraction, or the text of
/// an integer.
std::optional<std::int64_t> pydantic_int(const json::value& v) {
  if (const auto i = integer(v)) return i;
  if (v.is_double() && std::isfinite(v.get_double()) && std::trunc(v.get_double()) == v.get_double() && std::abs(v.get_double()) < 9e18)
    return static_cast<std::int64_t>(v.get_double());
  if (!v.is_string()) return std::nullopt;
  return integer_text(v.get_string());
}

constexpr std::string_view strategies[] = {"tensor", "channel", "group", "block", "token", "tensor_group", "attn_head"};

/// QuantizationArgs' block_structure: [rows, cols] of positive ints, or the older "RxC" text.
std::array<std::int64_t, 2> block_structure_of(const json::value& v, const std::string& field) {
  auto fail = [&]() -> std::array<std::int64_t, 2> {
    throw config_error("", field + " is " + quoted(v) + ": Invalid block_structure '" + (v.is_string() ? std::string(v.get_string()) : json::serialize(v)) +
                               "'. Must be a list of positive ints [rows, cols].");
  };
  std::vector<std::int64_t> dims;
  if (v.is_string()) {
    const std::string_view s = v.get_string();
    const auto x = s.find('x');
    if (x == std::string_view::npos) return fail();
    for (const auto part : {s.substr(0, x), s.substr(x + 1)}) {
      if (part.empty() || part.size() > 18 || !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) return fail();
      dims.push_back(std::stoll(std::string(part)));
    }
  } else if (v.is_array()) {
    for (const auto& e : v.get_array()) {
      const auto i = integer(e);
      if (!i) return fail();
      dims.push_back(*i);
    }
  }
  if (dims.size() != 2 || dims[0] <= 0 || dims[1] <= 0) return fail();
  return {dims[0], dims[1]};
}

/// One compressed-tensors QuantizationArgs object, validated as its pydantic model does, into the fields
/// the rules read.
void read_args(const json::object& a, const std::string& where, bool weights, config_group& g) {
  int num_bits = 8;  // pydantic's default
  if (const auto* bits = a.if_contains("num_bits"); bits && !bits->is_null()) {
    const auto b = pydantic_int(*bits);
    if (!b || *b < 1 || *b > 64) refuse(where + ".num_bits", *bits, "a number of bits from 1 to 64");
    num_bits = static_cast<int>(*b);
  }
  auto type = lower(optional_string(a, "type", where, "'int' or 'float'"));
  if (type.empty()) type = "int";
  if (type != "int" && type != "float") refuse(where + ".type", a.at("type"), "'int' or 'float'");
  auto strategy = lower(optional_string(a, "strategy", where, "a strategy name"));
  if (!strategy.empty() && std::find(std::begin(strategies), std::end(strategies), strategy) == std::end(strategies))
    refuse(where + ".strategy", a.at("strategy"), "one of 'tensor', 'channel', 'group', 'block', 'token', 'tensor_group' or 'attn_head'");
  std::optional<std::int64_t> group_size;
  if (const auto* gs = a.if_contains("group_size"); gs && !gs->is_null()) {
    group_size = pydantic_int(*gs);
    // 0 passes with an explicit strategy that takes no groups; without one pydantic cannot infer it.
    if (!group_size || *group_size < -1 || (*group_size == 0 && strategy.empty()))
      refuse(where + ".group_size", *gs, "group_size > 0 for strategy='group' and group_size = -1 for 'channel'");
  }
  if (strategy.empty()) strategy = !group_size ? "tensor" : *group_size > 0 ? "group" : "channel";  // pydantic infers it
  if ((strategy == "group" || strategy == "tensor_group") && !(group_size && *group_size > 0))
    throw config_error("", where + ".group_size is " + (group_size ? std::to_string(*group_size) : std::string("null")) + ": strategy " +
                               strategy + " requires group_size to be set to a positive value");
  if (group_size && *group_size > 0 && strategy != "group" && strategy != "tensor_group")
    throw config_error("", where + ".group_size is " + std::to_string(*group_size) + " with strategy " + strategy +
                               ": group_size requires strategy to be set to 'group'");
  std::optional<std::array<std::int64_t, 2>> block;
  if (const auto* b = a.if_contains("block_structure"); b && !b->is_null()) block = block_structure_of(*b, where + ".block_structure");
  if ((strategy == "block") != block.has_value())
    throw config_error("", where + (block ? ".block_structure is set with strategy " + strategy + ": Block structure requires block strategy"
                                          : ".strategy is block: Block strategy requires block structure"));
  bool dynamic = false, local = false;
  if (const auto* d = a.if_contains("dynamic"); d && !d->is_null()) {
    if (d->is_bool()) dynamic = d->get_bool();
    else if (d->is_string() && lower(d->get_string()) == "local") dynamic = local = true;
    else refuse(where + ".dynamic", *d, "true, false or 'local'");
  }
  if (strategy == "token" && !dynamic)
    throw config_error("", where + ".strategy is token: Cannot perform static token quantization, please use `dynamic=True`");
  if (dynamic && strategy != "token" && strategy != "tensor" && strategy != "tensor_group" && strategy != "group")
    throw config_error("", where + ".dynamic is set with strategy " + strategy + ": one of tensor, token, group and tensor_group must be used "
                                   "for dynamic quant");
  if (local && strategy != "tensor_group")
    throw config_error("", where + ".dynamic is 'local' with strategy " + strategy + ": local is only supported for strategy tensor_group");
  bool symmetric = true;  // pydantic's default
  if (const auto* sym = a.if_contains("symmetric"); sym && !sym->is_null()) {
    if (!sym->is_bool()) refuse(where + ".symmetric", *sym, "true or false");
    symmetric = sym->get_bool();
  }
  const auto scale_dtype = optional_string(a, "scale_dtype", where, "a torch dtype name such as 'torch.uint8'");
  if (weights) {
    g.has_weights = true;
    g.num_bits = num_bits;
    g.weight_type = type;
    g.strategy = strategy;
    g.scale_dtype = scale_dtype;
    g.symmetric = symmetric;
    g.group_size = group_size;
    g.block_structure = block;
  } else {
    g.has_input_activations = true;
    g.input_bits = num_bits;
    g.input_type = type;
    g.input_dynamic = dynamic;
  }
}

checkpoint_source read_fp8(const json::object& o, checkpoint_source s) {
  const std::string where = "quantization_config";
  s.method = checkpoint_method::fp8;
  const auto& act = required(o, "activation_scheme");
  if (!act.is_string() || (act.get_string() != "static" && act.get_string() != "dynamic"))
    throw config_error("", "Unsupported activation scheme " + (act.is_string() ? std::string(act.get_string()) : quoted(act)));
  s.skipped = string_list(o, "ignored_layers", where);
  s.skipped_key = "ignored_layers";
  if (s.skipped.empty()) {
    s.skipped = string_list(o, "modules_to_not_convert", where);
    if (!s.skipped.empty()) s.skipped_key = "modules_to_not_convert";
  }
  if (const auto* b = o.if_contains("weight_block_size"); b && !b->is_null()) {
    const std::string field = where + ".weight_block_size";
    if (!b->is_array()) refuse(field, *b, "a list of two positive integers [block_n, block_k]");
    const auto& dims = b->get_array();
    if (dims.size() != 2)
      throw config_error("", "The quantization block size of weight must have 2 dimensions, but got " + std::to_string(dims.size()) + " dimensions");
    const auto n = integer(dims[0]), k = integer(dims[1]);
    if (!n || !k || *n <= 0 || *k <= 0)
      refuse(field, *b, "two positive integers [block_n, block_k]: the rows and columns of a weight block, which the weight's dimensions are "
                        "divided by");
    if (act.get_string() != "dynamic")
      throw config_error("", "The block-wise quantization only supports dynamic activation scheme for now, but got " +
                                 std::string(act.get_string()) + " activation scheme.");
    s.weight_block_size = std::array<std::int64_t, 2>{*n, *k};
  }
  s.store_dtype = optional_string(o, "store_dtype", where, "a storage dtype name such as 'mxfp4'");
  return s;
}

checkpoint_source read_compressed_tensors(const json::object& o, checkpoint_source s) {
  const std::string where = "quantization_config";
  s.method = checkpoint_method::compressed_tensors;
  s.skipped = string_list(o, "ignore", where);
  s.skipped_key = "ignore";
  const auto format = optional_string(o, "format", where, "a compression format name");
  if (const auto* groups = o.if_contains("config_groups"); groups && !groups->is_null()) {
    if (!groups->is_object()) refuse(where + ".config_groups", *groups, "an object");
    for (const auto& [name, value] : groups->get_object()) {
      const std::string at = where + ".config_groups." + std::string(name);
      if (!value.is_object()) refuse(at, value, "an object");
      const auto& go = value.get_object();
      config_group g;
      g.name = std::string(name);
      g.targets = string_list(go, "targets", at);
      g.format = optional_string(go, "format", at, "a compression format name");
      if (g.format.empty()) g.format = format;
      for (const auto& [key, weights] : {std::pair<std::string_view, bool>{"weights", true}, {"input_activations", false}})
        if (const auto* args = go.if_contains(key); args && !args->is_null()) {
          if (!args->is_object()) refuse(at + "." + std::string(key), *args, "an object of quantization arguments");
          read_args(args->get_object(), at + "." + std::string(key), weights, g);
        }
      // vLLM drops a group whose only target is an attention module (KV-cache quantization).
      if (g.targets.size() == 1 && g.targets.front().ends_with("Attention")) continue;
      s.groups.push_back(std::move(g));
    }
  }
  if (const auto* t = o.if_contains("transform_config"); t && !t->is_null()) {
    if (!t->is_object()) refuse(where + ".transform_config", *t, "an object");
    if (!t->get_object().empty()) {
      s.has_transform_config = true;
      if (const auto* groups = t->get_object().if_contains("config_groups"); groups && !groups->is_null()) {
        if (!groups->is_object()) refuse(where + ".transform_config.config_groups", *groups, "an object");
        for (const auto& [name, value] : groups->get_object()) s.transform_schemes.emplace_back(name);
      }
    }
  }
  return s;
}

checkpoint_source read_modelopt(const json::object& o, checkpoint_source s) {
  const json::object* from = &o;
  s.skipped_key = "ignore";
  if (const auto* nested = o.if_contains("quantization")) {
    if (!nested->is_object()) throw config_error("", "Expected 'quantization' to be a dictionary in config");
    from = &nested->get_object();
    s.skipped_key = "exclude_modules";
  } else if (!o.contains("ignore")) {
    s.skipped_key = "exclude_modules";
  }
  const auto* algo = from->if_contains("quant_algo");
  if (!algo || algo->is_null() || (algo->is_string() && algo->get_string().empty()))
    throw config_error("", "Missing 'quant_algo' in quantization config");
  s.quant_algo = algo->is_string() ? std::string(algo->get_string()) : json::serialize(*algo);
  for (auto& c : s.quant_algo) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (from != &o)
    if (const auto* kv = from->if_contains("kv_cache_quant_algo"); kv && !kv->is_null() && !kv->is_string())
      throw config_error("", "kv_cache_quant_algo must be a string, got " + py_type(*kv));
  if (const auto* list = from->if_contains(s.skipped_key); list && !list->is_array())
    throw config_error("", "exclude_modules must be a list, got " + py_type(*list));
  // vLLM's from_config takes an int, or a string int() reads; the NVFP4 scales are [N, K/group_size].
  if (const auto* gs = from->if_contains("group_size"); gs && !gs->is_null()) {
    const auto size = python_int(*gs);
    if (!size) throw config_error("", "group_size must be an integer, got " + py_type(*gs));
    if (*size <= 0) refuse("quantization_config." + std::string(from != &o ? "quantization." : "") + "group_size", *gs,
                           "a positive number of weights per NVFP4 scale (16)");
    s.group_size = *size;
  }
  if (s.quant_algo == "FP8") s.method = checkpoint_method::modelopt_fp8;
  else if (s.quant_algo == "NVFP4") s.method = checkpoint_method::modelopt_fp4;
  else if (s.quant_algo == "MIXED_PRECISION") s.method = checkpoint_method::modelopt_mixed;
  else
    throw config_error("", "the checkpoint's ModelOpt quant_algo is " + text::py_repr(s.quant_algo) +
                               ", which this build does not read; it reads 'FP8', 'NVFP4' and 'MIXED_PRECISION'");
  s.skipped = string_list(*from, s.skipped_key, "quantization_config");
  if (s.method == checkpoint_method::modelopt_mixed) {
    // _from_config reads quantized_layers from `quantization` when the config has one, else from the top.
    const bool nested = o.contains("quantization");
    const auto had_group_size = from->contains("group_size") && !from->at("group_size").is_null();
    const auto group_size = s.group_size;
    read_modelopt_mixed(*from, nested ? "quantization_config.quantization" : "quantization_config", s);
    if (had_group_size) s.group_size = group_size;  // the config's own group_size wins over the first NVFP4 entry's
  }
  return s;
}

}  // namespace

checkpoint_source read_checkpoint_source(const json::value& qc, std::string_view model_type) {
  if (!qc.is_object()) throw config_error("", "the checkpoint's quantization_config is " + quoted(qc) + "; expected an object");
  const auto& o = qc.get_object();
  const auto& m = required(o, "quant_method");
  if (!m.is_string()) throw config_error("", "the checkpoint's quant_method is " + quoted(m) + "; expected a method name (a string)");
  checkpoint_source s;
  s.quant_method = std::string(m.get_string());
  if (s.quant_method == "fp8") return read_fp8(o, std::move(s));
  if (s.quant_method == "compressed-tensors") return read_compressed_tensors(o, std::move(s));
  if (s.quant_method == "mxfp4" || s.quant_method == "gpt_oss_mxfp4") {
    s.method = model_type == "gpt_oss" ? checkpoint_method::gpt_oss_mxfp4 : checkpoint_method::mxfp4;
    return s;
  }
  if (lower(s.quant_method).starts_with("modelopt")) return read_modelopt(o, std::move(s));
  if (s.quant_method == "quark") {
    read_quark(o, s);
    return s;
  }
  throw config_error("", "the checkpoint's quantization_config has quant_method " + text::py_repr(s.quant_method) +
                             ", which this build does not read; it reads 'fp8', 'compressed-tensors', 'mxfp4' (gpt-oss), "
                             "'modelopt' (FP8, NVFP4 and MIXED_PRECISION) and 'quark'");
}

}  // namespace qpolicy::source
