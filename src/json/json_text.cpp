#include "json_text.hpp"

#include <boost/json/basic_parser_impl.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "qpolicy/core/text.hpp"

namespace qpolicy::json_text {

namespace {

// A SAX pass that only watches object keys, to report duplicates (Boost.JSON keeps the last value
// at the first key's position, which is Python's behaviour, but says nothing).
struct duplicate_finder {
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);

  struct frame {
    bool is_object;
    std::vector<std::string> keys;
    std::size_t index = 0;
    std::string current;
  };
  std::vector<frame> stack;
  std::string key_part;
  std::vector<duplicate_key>* out = nullptr;

  void value_done() {
    if (!stack.empty() && !stack.back().is_object) ++stack.back().index;
  }
  bool on_document_begin(boost::json::error_code&) { return true; }
  bool on_document_end(boost::json::error_code&) { return true; }
  bool on_object_begin(boost::json::error_code&) { stack.push_back({true, {}, 0, {}}); return true; }
  bool on_object_end(std::size_t, boost::json::error_code&) { stack.pop_back(); value_done(); return true; }
  bool on_array_begin(boost::json::error_code&) { stack.push_back({false, {}, 0, {}}); return true; }
  bool on_array_end(std::size_t, boost::json::error_code&) { stack.pop_back(); value_done(); return true; }
  bool on_key_part(boost::json::string_view s, std::size_t, boost::json::error_code&) { key_part.append(s.data(), s.size()); return true; }
  bool on_key(boost::json::string_view s, std::size_t, boost::json::error_code&) {
    key_part.append(s.data(), s.size());
    auto& f = stack.back();
    for (const auto& k : f.keys)
      if (k == key_part) {
        std::string loc;
        for (std::size_t i = 0; i + 1 < stack.size(); ++i) {
          if (!loc.empty()) loc += '.';
          loc += stack[i].is_object ? stack[i].current : std::to_string(stack[i].index);
        }
        out->push_back({loc, key_part});
        break;
      }
    f.keys.push_back(key_part);
    f.current = key_part;
    key_part.clear();
    return true;
  }
  bool on_string_part(boost::json::string_view, std::size_t, boost::json::error_code&) { return true; }
  bool on_string(boost::json::string_view, std::size_t, boost::json::error_code&) { value_done(); return true; }
  bool on_number_part(boost::json::string_view, boost::json::error_code&) { return true; }
  bool on_int64(std::int64_t, boost::json::string_view, boost::json::error_code&) { value_done(); return true; }
  bool on_uint64(std::uint64_t, boost::json::string_view, boost::json::error_code&) { value_done(); return true; }
  bool on_double(double, boost::json::string_view, boost::json::error_code&) { value_done(); return true; }
  bool on_bool(bool, boost::json::error_code&) { value_done(); return true; }
  bool on_null(boost::json::error_code&) { value_done(); return true; }
  bool on_comment_part(boost::json::string_view, boost::json::error_code&) { return true; }
  bool on_comment(boost::json::string_view, boost::json::error_code&) { return true; }
};

boost::json::parse_options options_for(json_dialect dialect) {
  boost::json::parse_options o;
  o.max_depth = 64;
  o.allow_comments = dialect == json_dialect::relaxed;
  o.allow_trailing_commas = dialect == json_dialect::relaxed;
  o.allow_invalid_utf8 = false;
  return o;
}

[[noreturn]] void syntax_error(std::string_view text, std::size_t offset, std::string_view what, const boost::json::error_code& ec) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') { ++line; col = 1; }
    else ++col;
  }
  std::string reason = ec.message();
  if (ec == boost::json::error::too_deep) reason = "nested more than 64 levels deep";
  throw config_error("", "invalid JSON in " + std::string(what) + " at line " + std::to_string(line) + ", column " +
                             std::to_string(col) + ": " + reason);
}

}  // namespace

boost::json::value parse(std::string_view text, json_dialect dialect, std::string_view what,
                         std::vector<duplicate_key>* duplicates) {
  const auto opts = options_for(dialect);
  boost::json::stream_parser p({}, opts);
  boost::json::error_code ec;
  const std::size_t used = p.write_some(text.data(), text.size(), ec);
  if (!ec && used < text.size()) ec = boost::json::error::extra_data;
  if (!ec) p.finish(ec);
  if (ec) syntax_error(text, used, what, ec);
  if (duplicates) {
    boost::json::basic_parser<duplicate_finder> dp(opts);
    dp.handler().out = duplicates;
    boost::json::error_code ec2;
    dp.write_some(false, text.data(), text.size(), ec2);
  }
  return p.release();
}

std::string py_type(const boost::json::value& v) {
  switch (v.kind()) {
    case boost::json::kind::string: return "str";
    case boost::json::kind::int64:
    case boost::json::kind::uint64: return "int";
    case boost::json::kind::double_: return "float";
    case boost::json::kind::bool_: return "bool";
    case boost::json::kind::null: return "NoneType";
    case boost::json::kind::array: return "list";
    case boost::json::kind::object: return "dict";
  }
  return "object";
}

std::string py_float_repr(double d) {
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Numbers past the double range parse as infinity (as Python's json does): repr 'inf'.
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (std::isnan(d)) return "nan";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, res.ptr);  // e.g. -1.2345e+16
  std::string sign;
  if (s[0] == '-') { sign = "-"; s.erase(0, 1); }
  const auto e = s.find('e');
  std::string digits = s.substr(0, e);
  const int exp = std::stoi(s.substr(e + 1));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  if (exp < -4 || exp >= 16) {
    std::string m = digits.substr(0, 1);
    if (digits.size() > 1) m += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return sign + m + eb;
  }
  std::string out;
  if (exp < 0) {
    out = "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
  } else if (static_cast<std::size_t>(exp) + 1 >= digits.size()) {
    out = digits + std::string(static_cast<std::size_t>(exp) + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, static_cast<std::size_t>(exp) + 1) + "." + digits.substr(static_cast<std::size_t>(exp) + 1);
  }
  return sign + out;
}

std::string py_repr(const boost::json::value& v) {
  switch (v.kind()) {
    case boost::json::kind::string: return text::py_repr(std::string_view(v.get_string().data(), v.get_string().size()));
    case boost::json::kind::int64: return std::to_string(v.get_int64());
    case boost::json::kind::uint64: return std::to_string(v.get_uint64());
    case boost::json::kind::double_: return py_float_repr(v.get_double());
    case boost::json::kind::bool_: return v.get_bool() ? "True" : "False";
    case boost::json::kind::null: return "None";
    case boost::json::kind::array: {
      std::string out = "[";
      bool first = true;
      for (const auto& e : v.get_array()) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(e);
      }
      return out + "]";
    }
    case boost::json::kind::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& kv : v.get_object()) {
        if (!first) out += ", ";
        first = false;
        out += text::py_repr(std::string_view(kv.key().data(), kv.key().size())) + ": " + py_repr(kv.value());
      }
      return out + "}";
    }
  }
  return "?";
}

std::string py_str(const boost::json::value& v) {
  if (v.is_string()) return std::string(v.get_string().data(), v.get_string().size());
  return py_repr(v);
}

}  // namespace qpolicy::json_text
