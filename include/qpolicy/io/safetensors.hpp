#pragma once
// safetensors files: a memory-mapped reader that validates everything a truncated or hostile file can
// get wrong before any tensor is touched, and a streaming writer (header first, then each tensor in
// order) into a staged output, which appears only when the whole run's outputs are complete.
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qpolicy/config/config.hpp"
#include "qpolicy/io/detail/staged_output.hpp"

namespace qpolicy::safetensors {

/// Element types of the format.
enum class dtype : std::uint8_t { BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64, F8_E4M3, F8_E5M2 };

std::string_view to_string(dtype d);
/// Bytes per element.
std::size_t size_of(dtype d);

/// How the format stores a quantized element or scale type of the vocabulary.
constexpr dtype stored_type(qpolicy::dtype d) {
  constexpr dtype types[] = {dtype::F8_E4M3, dtype::U8, dtype::I8, dtype::F32};  // by qpolicy::dtype's value
  return types[static_cast<int>(d)];
}

/// One tensor's entry in the header.
struct tensor_info {
  std::string name;
  safetensors::dtype type = dtype::F32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte offsets into the data section
  std::int64_t elements() const;
};

/// An open file: the header, checked, and the mapped data. Throws config_error (exit 2) naming the
/// file and what is wrong with it, io_error (exit 1) when it cannot be opened or mapped.
class file {
 public:
  explicit file(const std::string& path);
  ~file();
  file(const file&) = delete;
  file& operator=(const file&) = delete;

  const std::string& path() const { return path_; }
  /// Tensors in data order.
  const std::vector<tensor_info>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const tensor_info* find(std::string_view name) const;
  /// The bytes of a tensor (valid while the file is open).
  std::span<const std::byte> data(const tensor_info& t) const;
  /// Copies a range of the mapped bytes (a part of data(t)) into `out` with pread: streamed reading
  /// that never maps the pages in, so the resident size stays the caller's buffers. io_error when the
  /// file cannot be read (or has shrunk).
  void read(std::span<const std::byte> range, std::byte* out) const;

 private:
  std::string path_;
  int fd_ = -1;
  const std::byte* map_ = nullptr;
  std::size_t size_ = 0;
  std::size_t data_start_ = 0;
  std::vector<tensor_info> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// Parses and checks a header (the JSON after the 8-byte length) against a data section of
/// `data_size` bytes; `where` names the file in messages. Used by `file`, and alone by the fuzz target.
std::vector<tensor_info> parse_header(std::string_view header, std::uint64_t data_size, const std::string& where,
                                      std::map<std::string, std::string>* metadata = nullptr);

/// What a writer will write for one tensor.
struct tensor_spec {
  std::string name;
  safetensors::dtype type = dtype::F32;
  std::vector<std::int64_t> shape;
  /// Its bytes (the writer checks the shape's arithmetic when it is constructed).
  std::uint64_t bytes() const {
    std::uint64_t n = size_of(type);
    for (auto d : shape) n *= static_cast<std::uint64_t>(d);
    return n;
  }
};

/// Streams one safetensors file into a staged output: the header at construction, then each
/// tensor's bytes in order (a tensor may come in pieces). The output_transaction that owns the staged
/// file makes it appear, all or nothing.
class writer {
 public:
  writer(staged_file& out, std::vector<tensor_spec> tensors, const std::map<std::string, std::string>& metadata);
  writer(const writer&) = delete;
  writer& operator=(const writer&) = delete;

  /// Appends bytes of the next tensor.
  void write(std::span<const std::byte> bytes);
  /// Checks that every tensor was written completely.
  void finish();

 private:
  void skip_empty();
  staged_file& out_;
  std::vector<tensor_spec> tensors_;
  std::vector<std::uint64_t> sizes_;
  std::size_t current_ = 0;
  std::uint64_t written_ = 0;  // of the current tensor
};

/// One safetensors file written on its own, all or nothing: a writer over its own output_transaction,
/// committed by finish().
class file_writer {
 public:
  file_writer(const std::string& path, std::vector<tensor_spec> tensors, const std::map<std::string, std::string>& metadata)
      : writer_(outputs_.stage(path), std::move(tensors), metadata) {}
  void write(std::span<const std::byte> bytes) { writer_.write(bytes); }
  /// Checks every tensor was written completely, then moves the file into place.
  void finish() {
    writer_.finish();
    outputs_.commit();
  }

 private:
  output_transaction outputs_;
  writer writer_;
};

}  // namespace qpolicy::safetensors
