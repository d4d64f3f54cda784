#pragma once
// Internal: JSON text -> boost::json::value with line/column errors and duplicate-key reports, read as
// Python's json reads it, and Python's str/repr/type names of JSON values for messages.
#include <boost/json.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "qpolicy/io/json_front.hpp"

namespace qpolicy::json_text {

/// A duplicate key: its path (LOC form) and the key.
struct duplicate_key {
  std::string loc;
  std::string key;
};

/// How a `\uXXXX` escape of a lone surrogate reads: as Python's json reads it (a str holding the
/// surrogate, kept here as its 3-byte generalized UTF-8 form, which text::decode_utf8 reads back), or
/// refused, as serde_json (safetensors' header reader) refuses it.
enum class lone_surrogates { accepted, refused };

/// A parsed JSON text. Boost.JSON holds an integer beyond 64 bits as a double; Python's json holds it
/// as an int, so the document keeps its digits, to print it and name its type as Python does. The
/// root lives on the heap: moving a document keeps every value's address.
class document {
 public:
  const boost::json::value& root() const { return *root_; }

  std::string py_type(const boost::json::value& v) const;
  std::string py_repr(const boost::json::value& v) const;
  std::string py_str(const boost::json::value& v) const;

 private:
  friend document parse(std::string_view, json_dialect, std::string_view, std::vector<duplicate_key>*, lone_surrogates);
  std::unique_ptr<boost::json::value> root_ = std::make_unique<boost::json::value>();
  std::unordered_map<const boost::json::value*, std::string> big_integers_;  // value -> its digits
};

/// Parses `text`; throws config_error "invalid JSON in WHAT at line L, column C: REASON".
document parse(std::string_view text, json_dialect dialect, std::string_view what, std::vector<duplicate_key>* duplicates,
               lone_surrogates surrogates = lone_surrogates::accepted);

/// boost::json::serialize, with lone surrogates written back as `\udXXX` escapes (valid UTF-8 out).
std::string serialize(const boost::json::value& v);

/// Boost.JSON strings as std::string_view.
inline std::string_view sv(const boost::json::string& s) { return {s.data(), s.size()}; }
inline std::string_view sv(boost::json::string_view s) { return {s.data(), s.size()}; }

std::string py_float_repr(double d);

}  // namespace qpolicy::json_text
