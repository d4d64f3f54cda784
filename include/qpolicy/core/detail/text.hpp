#pragma once
// Text helpers shared by every stage: UTF-8 decoding and Python-style str/repr, all constexpr so the
// compile-time front end builds the very same messages as the runtime one.
#include <cstdint>
#include <string>
#include <string_view>

#include "qpolicy/core/detail/lean_vector.hpp"

namespace qpolicy::text {

/// Result of decoding UTF-8: code points, or the byte offset of the first invalid sequence.
struct decoded_utf8 {
  lean_vector<char32_t> code_points;
  std::size_t bad_offset = std::string_view::npos;
  constexpr bool ok() const { return bad_offset == std::string_view::npos; }
};

/// UTF-8 decoding, strict (no overlongs, nothing above U+10FFFF) except that a surrogate's 3-byte
/// form reads as that code point: a Python str can hold a lone surrogate (JSON's "\ud800"), and
/// qpolicy keeps one that way (src/json/json_text.cpp). Input files never carry those bytes: the JSON
/// reader refuses them, as Python's UTF-8 decoding does.
constexpr decoded_utf8 decode_utf8(std::string_view s) {
  decoded_utf8 out;
  out.code_points.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      out.code_points.push_back(b0);
      ++i;
      continue;
    }
    int len = 0;
    char32_t cp = 0, min = 0;
    if ((b0 & 0xE0) == 0xC0) { len = 2; cp = b0 & 0x1F; min = 0x80; }
    else if ((b0 & 0xF0) == 0xE0) { len = 3; cp = b0 & 0x0F; min = 0x800; }
    else if ((b0 & 0xF8) == 0xF0) { len = 4; cp = b0 & 0x07; min = 0x10000; }
    else { out.bad_offset = i; return out; }
    if (i + len > s.size()) { out.bad_offset = i; return out; }
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) { out.bad_offset = i; return out; }
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF) { out.bad_offset = i; return out; }
    out.code_points.push_back(cp);
    i += len;
  }
  return out;
}

constexpr bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

constexpr void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

constexpr void append_hex(std::string& out, std::uint32_t v, int digits) {
  constexpr char hex[] = "0123456789abcdef";
  for (int k = digits - 1; k >= 0; --k) out += hex[(v >> (4 * k)) & 0xF];
}

/// `s` with each lone surrogate (its 3-byte form, ED A0..BF xx, never valid UTF-8) written as
/// `\udXXX`, as Python writes it to stderr (backslashreplace) and json.dumps writes it: valid UTF-8 out.
constexpr std::string escape_lone_surrogates(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b == 0xED && i + 2 < s.size() && (static_cast<unsigned char>(s[i + 1]) & 0xE0) == 0xA0) {
      const std::uint32_t u = 0xD000u | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
                              (static_cast<unsigned char>(s[i + 2]) & 0x3Fu);
      out += "\\u";
      append_hex(out, u, 4);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

constexpr std::string to_decimal(long long v) {
  char buf[24]{};  // filled from the end: one string construction (cheap in constant evaluation too)
  std::size_t at = sizeof buf;
  const bool neg = v < 0;
  unsigned long long u = neg ? 0ull - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
  do {
    buf[--at] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u);
  if (neg) buf[--at] = '-';
  return std::string(buf + at, sizeof buf - at);
}

// Printable per Python's str.isprintable for the characters a layer name can realistically hold;
// outside ASCII and Latin-1 controls we treat code points as printable, except the separators and
// format characters Python escapes most often (line/paragraph separators, BOM, soft hyphen).
constexpr bool python_printable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c >= 0x80 && c <= 0xA0) return false;
  if (c == 0xAD || c == 0x2028 || c == 0x2029 || c == 0xFEFF) return false;
  if (c >= 0x200B && c <= 0x200F) return false;
  if (c >= 0xD800 && c <= 0xDFFF) return false;
  if (c >= 0xE000 && c <= 0xF8FF) return false;  // private use
  return true;
}

/// Python repr() of a str given as UTF-8 (invalid bytes never reach here: inputs are validated).
constexpr std::string py_repr(std::string_view s) {
  const auto cps = decode_utf8(s).code_points;
  bool has_single = false, has_double = false;
  for (char32_t c : cps) {
    has_single |= c == U'\'';
    has_double |= c == U'"';
  }
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : cps) {
    if (c == U'\\') out += "\\\\";
    else if (c == U'\t') out += "\\t";
    else if (c == U'\n') out += "\\n";
    else if (c == U'\r') out += "\\r";
    else if (c == static_cast<char32_t>(quote)) { out += '\\'; out += quote; }
    else if (python_printable(c)) append_utf8(out, c);
    else if (c <= 0xFF) { out += "\\x"; append_hex(out, c, 2); }
    else if (c <= 0xFFFF) { out += "\\u"; append_hex(out, c, 4); }
    else { out += "\\U"; append_hex(out, c, 8); }
  }
  out += quote;
  return out;
}

/// Python repr() of a list of str: ['a', 'b'].
template <class Range>
constexpr std::string py_repr_list(const Range& items) {
  std::string out = "[";
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += ", ";
    first = false;
    out += py_repr(std::string_view(item));
  }
  return out + "]";
}

/// Python repr() of a set of str in the given order: {'a', 'b'}, or set() when empty.
template <class Range>
constexpr std::string py_repr_set(const Range& items) {
  std::string out;
  for (const auto& item : items) {
    out += out.empty() ? "{" : ", ";
    out += py_repr(std::string_view(item));
  }
  if (out.empty()) return "set()";
  return out + "}";
}

/// Where `from` occurs in `s`, into `at`: every non-overlapping occurrence, left to right, as
/// str.replace finds them (none for an empty `from`: the name stays as it is).
constexpr void find_all_into(lean_vector<std::size_t>& at, std::string_view s, std::string_view from) {
  at.clear();
  if (from.empty()) return;
  for (auto j = s.find(from); j != std::string_view::npos; j = s.find(from, j + from.size())) at.push_back(j);
}

/// `s` with the `from_size` characters at each of `at` (find_all_into's answer) replaced by `to`, into
/// `out` (reusing its storage). One search serves several replacements (a fused layer's shards).
constexpr void replace_at_into(std::string& out, std::string_view s, const lean_vector<std::size_t>& at,
                               std::size_t from_size, std::string_view to) {
  out.resize(s.size() - at.size() * from_size + at.size() * to.size());
  // char_traits::copy: a loop during constant evaluation, memcpy at run time (a plan builds a name
  // per shard of every fused layer).
  using traits = std::char_traits<char>;
  char* o = out.data();
  std::size_t i = 0;
  for (const auto j : at) {
    traits::copy(o, s.data() + i, j - i);
    o += j - i;
    traits::copy(o, to.data(), to.size());
    o += to.size();
    i = j + from_size;
  }
  traits::copy(o, s.data() + i, s.size() - i);
}

/// Python str.replace(old, new) into `out` (reusing its storage).
constexpr void replace_all_into(std::string& out, std::string_view s, std::string_view from, std::string_view to) {
  lean_vector<std::size_t> at;
  find_all_into(at, s, from);
  replace_at_into(out, s, at, from.size(), to);
}

constexpr std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  replace_all_into(out, s, from, to);
  return out;
}

}  // namespace qpolicy::text
