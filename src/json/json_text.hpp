#pragma once
// Internal: JSON text -> boost::json::value with line/column errors and duplicate-key reports, and
// Python's str/repr/type names of JSON values for messages.
#include <boost/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "qpolicy/io/json_front.hpp"

namespace qpolicy::json_text {

/// A duplicate key: its path (LOC form) and the key.
struct duplicate_key {
  std::string loc;
  std::string key;
};

/// Parses `text`; throws config_error "invalid JSON in WHAT at line L, column C: REASON".
boost::json::value parse(std::string_view text, json_dialect dialect, std::string_view what,
                         std::vector<duplicate_key>* duplicates);

/// Boost.JSON strings as std::string_view.
inline std::string_view sv(const boost::json::string& s) { return {s.data(), s.size()}; }
inline std::string_view sv(boost::json::string_view s) { return {s.data(), s.size()}; }

std::string py_type(const boost::json::value& v);
std::string py_repr(const boost::json::value& v);
std::string py_str(const boost::json::value& v);
std::string py_float_repr(double d);

}  // namespace qpolicy::json_text
