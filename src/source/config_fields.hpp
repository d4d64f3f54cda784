#pragma once
// Internal to src/source: reading a checkpoint's quantization_config fields as vLLM's Python reads them
// (types as Python names them, ints as pydantic's lax mode or int() takes them), with refusals that name
// the field, the value and what was expected. checkpoint_config.cpp reads the methods' configs;
// per_layer_config.cpp the ones that name each layer's scheme (Quark, ModelOpt MIXED_PRECISION).
#include <boost/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qpolicy/source/checkpoint_source.hpp"

namespace qpolicy::source::detail {

/// Python's type of a JSON value, as `type(v)` prints.
std::string py_type(const boost::json::value& v);
/// A JSON value as Python's repr prints the object json.loads makes of it ({'a': 1, 'b': None}).
std::string py_value_repr(const boost::json::value& v);
/// A JSON value as a message quotes it: a string as Python's repr, anything else as JSON.
std::string quoted(const boost::json::value& v);
/// Throws config_error: "FIELD is VALUE; expected EXPECTED".
[[noreturn]] void refuse(const std::string& field, const boost::json::value& v, std::string_view expected);
/// Python's truth value of a JSON value (null, false, 0, "", [] and {} are false).
bool truthy(const boost::json::value& v);
std::string lower(std::string_view s);
/// A JSON integer that fits int64 (a bool or a float is not one).
std::optional<std::int64_t> integer(const boost::json::value& v);
/// The text of an integer (an optional sign, up to 18 characters of digits), or nullopt.
std::optional<std::int64_t> integer_text(std::string_view text);
/// Python's int() of a JSON value: an int, a bool, a float truncated, or the text of an integer.
std::optional<std::int64_t> python_int(const boost::json::value& v);
/// A list of strings at `key` (absent or null: empty); anything else is refused.
std::vector<std::string> string_list(const boost::json::object& o, std::string_view key, std::string_view where);
/// A string at `key`, or "" when absent or null; anything else is refused.
std::string optional_string(const boost::json::object& o, std::string_view key, const std::string& where, std::string_view expected);
/// vLLM's get_from_keys: a required key, or its ValueError.
const boost::json::value& required(const boost::json::object& o, std::string_view key);
/// The JSON text of `v` with every object's keys sorted: equal for configs vLLM's deep_compare calls equal.
std::string canonical_json(const boost::json::value& v);

/// Quark's quantization_config (quant_method quark) into `s`.
void read_quark(const boost::json::object& config, checkpoint_source& s);
/// ModelOpt MIXED_PRECISION's per-layer algos (`quantized_layers` of `from`, the `quantization` object or
/// the config itself) into `s`.
void read_modelopt_mixed(const boost::json::object& from, const std::string& where, checkpoint_source& s);

}  // namespace qpolicy::source::detail
