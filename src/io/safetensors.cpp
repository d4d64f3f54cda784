#include "qpolicy/io/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>

#include "../json/json_text.hpp"
#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/io/io_error.hpp"
#include "qpolicy/io/detail/paths.hpp"

namespace qpolicy::safetensors {

namespace bj = boost::json;
using json_text::sv;

namespace {

struct dtype_entry {
  dtype type;
  std::string_view name;
  std::size_t bytes;
};
constexpr dtype_entry dtypes[] = {
    {dtype::BOOL, "BOOL", 1}, {dtype::U8, "U8", 1},     {dtype::I8, "I8", 1},           {dtype::I16, "I16", 2},
    {dtype::U16, "U16", 2},   {dtype::F16, "F16", 2},   {dtype::BF16, "BF16", 2},       {dtype::I32, "I32", 4},
    {dtype::U32, "U32", 4},   {dtype::F32, "F32", 4},   {dtype::F64, "F64", 8},         {dtype::I64, "I64", 8},
    {dtype::U64, "U64", 8},   {dtype::F8_E4M3, "F8_E4M3", 1}, {dtype::F8_E5M2, "F8_E5M2", 1},
};

/// Header JSON larger than this is refused before parsing (the Rust implementation's limit).
constexpr std::uint64_t max_header = 100u << 20;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw config_error("", where + ": " + what);
}

std::string dtype_names() {
  std::string s;
  for (const auto& e : dtypes) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

}  // namespace

std::string_view to_string(dtype d) { return dtypes[static_cast<std::size_t>(d)].name; }
std::size_t size_of(dtype d) { return dtypes[static_cast<std::size_t>(d)].bytes; }

std::int64_t tensor_info::elements() const { return checked::elements(shape).value_or(0); }

std::vector<tensor_info> parse_header(std::string_view header, std::uint64_t data_size, const std::string& where,
                                      std::map<std::string, std::string>* metadata) {
  if (header.empty() || header.front() != '{') bad(where, "the header is not a JSON object (it must start with '{')");
  std::vector<json_text::duplicate_key> dups;
  json_text::document doc;
  try {
    // serde_json, which reads the header in safetensors, refuses lone surrogates.
    doc = json_text::parse(header, json_dialect::strict, "the safetensors header", &dups, json_text::lone_surrogates::refused);
  } catch (const config_error& e) {
    bad(where, e.message());
  }
  const auto& v = doc.root();
  if (!dups.empty()) bad(where, "the header names " + text::py_repr(dups.front().key) + " twice");
  if (!v.is_object()) bad(where, "the header is not a JSON object");
  std::vector<tensor_info> out;
  for (const auto& kv : v.get_object()) {
    const std::string name(sv(kv.key()));
    if (name == "__metadata__") {
      if (!kv.value().is_object()) bad(where, "__metadata__ must be an object of strings");
      for (const auto& m : kv.value().get_object()) {
        if (!m.value().is_string())
          bad(where, "__metadata__[" + text::py_repr(sv(m.key())) + "] must be a string, got " + doc.py_type(m.value()));
        if (metadata) (*metadata)[std::string(sv(m.key()))] = std::string(sv(m.value().get_string()));
      }
      continue;
    }
    const std::string at = "tensor " + text::py_repr(name);
    if (!kv.value().is_object()) bad(where, at + " must be an object with dtype, shape and data_offsets");
    const auto& o = kv.value().get_object();
    for (const auto& f : o)
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
        bad(where, at + " has an unknown field " + text::py_repr(sv(f.key())));
    tensor_info t;
    t.name = name;
    const auto* d = o.if_contains("dtype");
    if (!d || !d->is_string()) bad(where, at + " has no dtype string");
    const auto* found = std::find_if(std::begin(dtypes), std::end(dtypes),
                                     [&](const dtype_entry& e) { return e.name == sv(d->get_string()); });
    if (found == std::end(dtypes))
      bad(where, at + " has dtype " + doc.py_repr(*d) + "; expected one of " + dtype_names());
    t.type = found->type;
    const auto* s = o.if_contains("shape");
    if (!s || !s->is_array()) bad(where, at + " has no shape list");
    std::vector<std::uint64_t> dims;  // as written, for messages (2^64 - 1 is not -1)
    for (const auto& dim : s->get_array()) {
      if (!dim.is_int64() && !dim.is_uint64()) bad(where, at + " has a shape entry that is not an integer: " + doc.py_repr(dim));
      if (dim.is_int64() && dim.get_int64() < 0) bad(where, at + " has a negative dimension " + doc.py_repr(dim));
      dims.push_back(dim.is_int64() ? static_cast<std::uint64_t>(dim.get_int64()) : dim.get_uint64());
    }
    const auto* off = o.if_contains("data_offsets");
    if (!off || !off->is_array() || off->get_array().size() != 2) bad(where, at + " needs data_offsets [begin, end]");
    for (const auto& x : off->get_array())
      if (!x.is_uint64() && !(x.is_int64() && x.get_int64() >= 0))
        bad(where, at + " has a data offset that is not a non-negative integer: " + doc.py_repr(x));
    t.begin = off->get_array()[0].to_number<std::uint64_t>();
    t.end = off->get_array()[1].to_number<std::uint64_t>();
    if (t.begin > t.end) bad(where, at + " has data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "] out of order");
    if (t.end > data_size)
      bad(where, at + " ends at byte " + std::to_string(t.end) + " of a data section of " + std::to_string(data_size) +
                     " bytes (the file is truncated or its header is wrong)");
    // Every size from here on is int64 arithmetic: a shape whose non-zero dimensions multiply past
    // 2^63 - 1 is refused even when another dimension is 0.
    for (auto d : dims) t.shape.push_back(d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ? -1 : static_cast<std::int64_t>(d));
    const auto elements = checked::elements(t.shape);
    const auto bytes = elements ? checked::bytes(*elements, static_cast<std::int64_t>(size_of(t.type))) : std::nullopt;
    if (!bytes)
      bad(where, at + ": shape " + checked::shape_text(dims) + " of " + std::string(found->name) +
                     " has more elements than a 64-bit size can count (its non-zero dimensions multiply past 2^63 - 1 bytes)");
    if (static_cast<std::uint64_t>(*bytes) != t.end - t.begin)
      bad(where, at + ": shape " + checked::shape_text(dims) + " of " + std::string(found->name) + " needs " +
                     std::to_string(*bytes) + " bytes, but data_offsets span " + std::to_string(t.end - t.begin));
    out.push_back(std::move(t));
  }
  // The tensors must tile the data section: sorted by offset, no overlap, no gap, nothing after.
  std::sort(out.begin(), out.end(), [](const tensor_info& a, const tensor_info& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t at = 0;
  for (const auto& t : out) {
    if (t.begin < at) bad(where, "tensor " + text::py_repr(t.name) + " overlaps the tensor before it (starts at byte " +
                                     std::to_string(t.begin) + ", the previous one ends at " + std::to_string(at) + ")");
    if (t.begin > at) bad(where, "bytes " + std::to_string(at) + " to " + std::to_string(t.begin) + " of the data section belong to no tensor");
    at = t.end;
  }
  if (at != data_size)
    bad(where, "the data section has " + std::to_string(data_size - at) + " bytes after the last tensor");
  return out;
}

file::file(const std::string& path) : path_(path) {
  check_input_file(path, "the input");
  // O_NONBLOCK: a path that turned into a FIFO after the check still cannot block the open.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw io_error("cannot open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw io_error("cannot open", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    bad(path, "not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    bad(path, "the file has " + std::to_string(size_) + " bytes, fewer than the 8 of the header length");
  }
  void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  if (m == MAP_FAILED) {
    ::close(fd);
    throw io_error("cannot map", path, map_err);
  }
  fd_ = fd;  // kept for page-cache advice (release)
  map_ = static_cast<const std::byte*>(m);
  try {
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(map_[i]);
    if (n > max_header) bad(path, "the header length " + std::to_string(n) + " exceeds the 100 MiB limit");
    if (n > size_ - 8)
      bad(path, "the header length " + std::to_string(n) + " exceeds the " + std::to_string(size_ - 8) +
                    " bytes after it (the file is truncated)");
    data_start_ = 8 + static_cast<std::size_t>(n);
    tensors_ = parse_header({reinterpret_cast<const char*>(map_ + 8), static_cast<std::size_t>(n)}, size_ - data_start_, path,
                            &metadata_);
  } catch (...) {
    ::munmap(const_cast<std::byte*>(map_), size_);
    ::close(fd_);
    throw;
  }
}

file::~file() {
  if (map_) ::munmap(const_cast<std::byte*>(map_), size_);
  if (fd_ >= 0) ::close(fd_);
}

void file::read(std::span<const std::byte> range, std::byte* out) const {
  auto offset = static_cast<off_t>(range.data() - map_);
  std::size_t left = range.size();
  while (left > 0) {
    const ssize_t n = ::pread(fd_, out, left, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw io_error("error while reading", path_, n < 0 ? errno : EIO);
    out += n;
    offset += n;
    left -= static_cast<std::size_t>(n);
  }
}

const tensor_info* file::find(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const std::byte> file::data(const tensor_info& t) const {
  return {map_ + data_start_ + t.begin, static_cast<std::size_t>(t.end - t.begin)};
}

// ---- writer ----

writer::writer(staged_file& out, std::vector<tensor_spec> tensors, const std::map<std::string, std::string>& metadata)
    : out_(out), tensors_(std::move(tensors)) {
  bj::object header;
  if (!metadata.empty()) {
    bj::object m;
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  std::int64_t at = 0;
  for (const auto& t : tensors_) {
    const auto where = out.target() + ": tensor " + text::py_repr(t.name);
    if (header.contains(t.name)) throw config_error("", where + " is written twice");
    const auto elements = checked::elements(t.shape);
    const auto n = elements ? checked::bytes(*elements, static_cast<std::int64_t>(size_of(t.type))) : std::nullopt;
    const auto end = n ? checked::add(at, *n) : std::nullopt;
    if (!end) throw config_error("", where + " of shape " + checked::shape_text(t.shape) + " does not fit in a 64-bit file offset");
    bj::array shape;
    for (auto d : t.shape) shape.push_back(d);
    bj::object e;
    e["dtype"] = std::string(to_string(t.type));
    e["shape"] = std::move(shape);
    e["data_offsets"] = bj::array{at, *end};
    header[t.name] = std::move(e);
    sizes_.push_back(static_cast<std::uint64_t>(*n));
    at = *end;
  }
  std::string text = json_text::serialize(header);
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  std::array<std::byte, 8> len;
  for (int i = 0; i < 8; ++i) len[i] = static_cast<std::byte>(static_cast<std::uint64_t>(text.size()) >> (8 * i));
  out_.write(len);
  out_.write(text);
  skip_empty();
}

void writer::skip_empty() {
  while (current_ < tensors_.size() && sizes_[current_] == 0) ++current_;
}

void writer::write(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    if (current_ >= tensors_.size()) throw config_error("", out_.target() + ": more data written than the tensors declared");
    const std::uint64_t room = sizes_[current_] - written_;
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(room, bytes.size()));
    out_.write(bytes.first(n));
    written_ += n;
    bytes = bytes.subspan(n);
    if (written_ == sizes_[current_]) {
      ++current_;
      written_ = 0;
      skip_empty();
    }
  }
}

void writer::finish() {
  if (current_ != tensors_.size())
    throw config_error("", out_.target() + ": tensor " + text::py_repr(tensors_[current_].name) + " was not written completely");
}

}  // namespace qpolicy::safetensors
