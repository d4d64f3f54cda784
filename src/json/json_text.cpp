#include "json_text.hpp"

#include <boost/json/basic_parser_impl.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "qpolicy/core/detail/text.hpp"

namespace qpolicy::json_text {

namespace {

/// One step of a path into a document: an object key or an array index.
struct path_step {
  bool is_key;
  std::string key;
  std::size_t index;
};

/// An integer beyond 64 bits: where it is and its digits.
struct big_integer {
  std::vector<path_step> path;
  std::string digits;
};

// Python's int() refuses longer decimal strings (sys.int_info.default_max_str_digits), so its json does.
constexpr std::size_t python_max_int_digits = 4300;

// A SAX pass over the keys and numbers: reports duplicate keys (Boost.JSON keeps the last value at the
// first key's position, which is Python's behaviour, but says nothing) and records the digits of the
// integers that Boost.JSON can only hold as doubles.
struct key_watcher {
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
  std::vector<duplicate_key>* duplicates = nullptr;
  std::vector<big_integer> big_integers;
  const char* text_begin = nullptr;
  std::size_t too_long_at = std::string_view::npos;  // offset of the first integer past Python's limit
  std::size_t too_long_digits = 0;

  std::vector<path_step> path() const {
    std::vector<path_step> out;
    for (const auto& f : stack) out.push_back({f.is_object, f.is_object ? f.current : std::string(), f.index});
    return out;
  }
  // A repeated key replaces its earlier value: forget what was recorded under it.
  void forget_under(const std::vector<path_step>& prefix) {
    std::erase_if(big_integers, [&](const big_integer& b) {
      if (b.path.size() < prefix.size()) return false;
      for (std::size_t i = 0; i < prefix.size(); ++i)
        if (b.path[i].is_key != prefix[i].is_key || b.path[i].key != prefix[i].key || b.path[i].index != prefix[i].index)
          return false;
      return true;
    });
  }
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
    f.current = key_part;
    for (const auto& k : f.keys)
      if (k == key_part) {
        std::string loc;
        for (std::size_t i = 0; i + 1 < stack.size(); ++i) {
          if (!loc.empty()) loc += '.';
          loc += stack[i].is_object ? stack[i].current : std::to_string(stack[i].index);
        }
        if (duplicates) duplicates->push_back({loc, key_part});
        forget_under(path());
        break;
      }
    f.keys.push_back(key_part);
    key_part.clear();
    return true;
  }
  bool on_string_part(boost::json::string_view, std::size_t, boost::json::error_code&) { return true; }
  bool on_string(boost::json::string_view, std::size_t, boost::json::error_code&) { value_done(); return true; }
  bool on_number_part(boost::json::string_view, boost::json::error_code&) { return true; }
  bool on_int64(std::int64_t, boost::json::string_view, boost::json::error_code&) { value_done(); return true; }
  bool on_uint64(std::uint64_t, boost::json::string_view, boost::json::error_code&) { value_done(); return true; }
  bool on_double(double, boost::json::string_view s, boost::json::error_code&) {
    // The whole text is written at once, so `s` is the whole number.
    if (s.find_first_of(".eE") == boost::json::string_view::npos) {
      const std::size_t digits = s.size() - (s.starts_with('-') ? 1 : 0);
      if (digits > python_max_int_digits && too_long_at == std::string_view::npos) {
        too_long_at = static_cast<std::size_t>(s.data() - text_begin);
        too_long_digits = digits;
      }
      big_integers.push_back({path(), std::string(s.data(), s.size())});
    }
    value_done();
    return true;
  }
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

[[noreturn]] void syntax_error(std::string_view text, std::size_t offset, std::string_view what, std::string_view reason) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') { ++line; col = 1; }
    else ++col;
  }
  throw config_error("", "invalid JSON in " + std::string(what) + " at line " + std::to_string(line) + ", column " +
                             std::to_string(col) + ": " + std::string(reason));
}

std::string reason_of(const boost::json::error_code& ec) {
  if (ec == boost::json::error::too_deep) return "nested more than 64 levels deep";
  return ec.message();
}

/// The text with every lone-surrogate escape replaced by the surrogate's 3 bytes, and where each
/// replacement landed in the new text (each one is 3 bytes shorter than its escape).
struct surrogates_rewritten {
  std::string text;
  std::vector<std::size_t> at;              // offsets in `text`, ascending
  std::size_t invalid_utf8 = std::string_view::npos;  // first invalid raw byte in a string (original offset)
  std::size_t original_offset(std::size_t offset) const {
    std::size_t before = 0;
    while (before < at.size() && at[before] < offset) ++before;
    return offset + 3 * before;
  }
};

int hex4(std::string_view t, std::size_t i) {
  if (i + 4 > t.size()) return -1;
  int v = 0;
  for (std::size_t k = i; k < i + 4; ++k) {
    const char c = t[k];
    const int d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// Finds lone-surrogate escapes in strings (a high one not followed by a low one, or a low one alone),
// as Python's json decoder pairs them, skipping comments, and notes raw bytes that are not UTF-8.
surrogates_rewritten rewrite_lone_surrogates(std::string_view t) {
  surrogates_rewritten out;
  std::size_t copied = 0;
  bool in_string = false;
  std::size_t i = 0;
  while (i < t.size()) {
    const char c = t[i];
    if (!in_string) {
      if (c == '"') in_string = true;
      else if (c == '/' && i + 1 < t.size() && t[i + 1] == '/') { i = t.find('\n', i); if (i == t.npos) break; }
      else if (c == '/' && i + 1 < t.size() && t[i + 1] == '*') { i = t.find("*/", i + 2); if (i == t.npos) break; ++i; }
      ++i;
      continue;
    }
    if (c == '"') { in_string = false; ++i; continue; }
    if (static_cast<unsigned char>(c) >= 0x80) {
      const auto b0 = static_cast<unsigned char>(c);
      const std::size_t len = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
      const auto d = text::decode_utf8(t.substr(i, len));
      if ((!d.ok() || d.code_points.size() != 1 || (d.code_points[0] >= 0xD800 && d.code_points[0] <= 0xDFFF)) &&
          out.invalid_utf8 == std::string_view::npos)
        out.invalid_utf8 = i;
      i += d.ok() ? len : 1;
      continue;
    }
    if (c != '\\') { ++i; continue; }
    const int u = i + 1 < t.size() && t[i + 1] == 'u' ? hex4(t, i + 2) : -1;
    if (u < 0) { i += 2; continue; }
    if (u >= 0xD800 && u <= 0xDBFF && t.substr(i + 6, 2) == "\\u" && hex4(t, i + 8) >= 0xDC00 && hex4(t, i + 8) <= 0xDFFF) {
      i += 12;  // a pair: Boost.JSON joins it as Python does
      continue;
    }
    if (u >= 0xD800 && u <= 0xDFFF) {
      out.text.append(t.substr(copied, i - copied));
      out.at.push_back(out.text.size());
      out.text += static_cast<char>(0xE0 | (u >> 12));
      out.text += static_cast<char>(0x80 | ((u >> 6) & 0x3F));
      out.text += static_cast<char>(0x80 | (u & 0x3F));
      copied = i + 6;
    }
    i += 6;
  }
  out.text.append(t.substr(copied));
  return out;
}

const boost::json::value* find_path(const boost::json::value& root, const std::vector<path_step>& path) {
  const boost::json::value* v = &root;
  for (const auto& step : path) {
    if (step.is_key) {
      if (!v->is_object()) return nullptr;
      v = v->get_object().if_contains(step.key);
    } else {
      if (!v->is_array() || step.index >= v->get_array().size()) return nullptr;
      v = &v->get_array()[step.index];
    }
    if (!v) return nullptr;
  }
  return v;
}

}  // namespace

document parse(std::string_view original, json_dialect dialect, std::string_view what,
               std::vector<duplicate_key>* duplicates, lone_surrogates surrogates) {
  auto opts = options_for(dialect);
  surrogates_rewritten rewritten;
  std::string_view text = original;
  if (surrogates == lone_surrogates::accepted && original.find("\\u") != std::string_view::npos) {
    rewritten = rewrite_lone_surrogates(original);
    if (!rewritten.at.empty()) {
      // Python decodes the whole file before it parses, so a byte that is not UTF-8 is the error.
      if (rewritten.invalid_utf8 != std::string_view::npos) syntax_error(original, rewritten.invalid_utf8, what, "syntax error");
      text = rewritten.text;
      opts.allow_invalid_utf8 = true;  // the only non-UTF-8 bytes left are the surrogates written here
    }
  }
  boost::json::basic_parser<key_watcher> watch(opts);
  watch.handler().duplicates = duplicates;
  watch.handler().text_begin = text.data();
  boost::json::error_code ec;
  std::size_t used = watch.write_some(false, text.data(), text.size(), ec);
  if (!ec && used < text.size()) ec = boost::json::error::extra_data;
  const auto& w = watch.handler();
  if (w.too_long_at != std::string_view::npos && (!ec || w.too_long_at < used))
    syntax_error(original, rewritten.original_offset(w.too_long_at), what,
                 "Exceeds the limit (4300 digits) for integer string conversion: value has " +
                     std::to_string(w.too_long_digits) + " digits; use sys.set_int_max_str_digits() to increase the limit");
  if (ec) syntax_error(original, rewritten.original_offset(used), what, reason_of(ec));

  boost::json::stream_parser p({}, opts);
  p.write(text.data(), text.size(), ec);
  if (!ec) p.finish(ec);
  if (ec) syntax_error(original, 0, what, reason_of(ec));  // not reached: the watcher saw the same text
  document doc;
  *doc.root_ = p.release();
  for (const auto& b : w.big_integers)
    if (const auto* v = find_path(*doc.root_, b.path); v && v->is_double()) doc.big_integers_[v] = b.digits;
  return doc;
}

std::string serialize(const boost::json::value& v) {
  // A surrogate's bytes appear only inside strings, where `\udXXX` is the JSON for it.
  return text::escape_lone_surrogates(boost::json::serialize(v));
}

std::string document::py_type(const boost::json::value& v) const {
  if (v.is_double() && big_integers_.contains(&v)) return "int";
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

std::string document::py_repr(const boost::json::value& v) const {
  if (v.is_double())
    if (auto it = big_integers_.find(&v); it != big_integers_.end()) return it->second;
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

std::string document::py_str(const boost::json::value& v) const {
  if (v.is_string()) return std::string(v.get_string().data(), v.get_string().size());
  return py_repr(v);
}

}  // namespace qpolicy::json_text
