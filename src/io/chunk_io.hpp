#pragma once
// The streaming stage's reads and writes a chunk at a time (checkpoint_stages.cpp): input chunks read
// on a helper thread into reused buffers while the caller works, the next tensor's first chunk read
// ahead, a chunk still held reused instead of read again, and code chunks written on a helper thread.
#include <cstddef>
#include <cstdint>
#include <future>
#include <span>
#include <vector>

#include "checkpoint_files.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/io/safetensors.hpp"

namespace qpolicy::checkpoint_io {

/// Input bytes a row chunk holds (a streamed tensor's working set): large enough that per-chunk costs
/// vanish, small enough that the buffers stay far below the memory bound.
inline constexpr std::int64_t chunk_bytes = 16 << 20;

/// The read buffers a stream keeps from tensor to tensor (allocated once), and what each holds: two
/// for a reader's chunks in turn, one for the next tensor's first chunk read ahead. A buffer remembers
/// the file range its last completed read left there, so a tensor read twice (the per-tensor scales'
/// amax pass, then the codes) reads a chunk that is still held only once.
class read_buffers {
 public:
  read_buffers() = default;
  read_buffers(const read_buffers&) = delete;
  read_buffers& operator=(const read_buffers&) = delete;
  ~read_buffers();
  /// The tensor streamed after the current one (nullptr: none). The current tensor's first reader
  /// starts reading its first chunk ahead, into the third buffer.
  void set_next(const tensor_ref* t) { next_ = t; }

 private:
  friend class chunk_reader;
  /// Starts reading next_'s first chunk, once per next tensor (an earlier read not taken is dropped).
  void read_ahead_next();
  struct slot {
    std::vector<std::uint32_t> words;   // 4-byte words: aligned for every element type
    std::span<const std::byte> held{};  // the file range a completed read left here
    std::span<const std::byte> coming{};  // the range a read in flight brings
    const safetensors::file* file = nullptr;  // whose ranges these are
  };
  slot slots_[2];
  slot ahead_;
  std::future<void> ahead_pending_;
  const tensor_ref* next_ = nullptr;
  const tensor_ref* ahead_of_ = nullptr;  // the tensor read ahead last
};

/// Reads a tensor's bytes a chunk at a time with pread into two buffers in turn, the next chunk on a
/// helper thread while the caller works on the current one: reading overlaps computing, and the
/// resident size is the buffers' whatever the tensor's size. A chunk holds whole granules (rows, or
/// 128-row block slabs).
class chunk_reader {
 public:
  chunk_reader(const tensor_ref& t, std::size_t granule, read_buffers& buffers);
  ~chunk_reader();
  chunk_reader(const chunk_reader&) = delete;
  chunk_reader& operator=(const chunk_reader&) = delete;
  /// The next chunk's bytes (valid until the call after next), empty at the end.
  std::span<const std::byte> next();

 private:
  void start(std::size_t at, bool nothing_in_use);
  const safetensors::file& file_;
  std::span<const std::byte> data_;
  std::size_t size_ = 0, reading_at_ = 0;
  read_buffers& buffers_;
  int current_ = 0;
  std::future<void> pending_;
};

/// Writes the codes of one chunk on a helper thread while the caller quantizes the next into the
/// other of two buffers (reused: a stream of chunks allocates twice); writes stay in order, one at a
/// time. finish() waits and rethrows a failed write's error.
class chunk_writer {
 public:
  /// `buffers`: the two code buffers, kept by the caller from tensor to tensor (allocated once).
  chunk_writer(safetensors::writer& out, std::vector<std::uint8_t> (&buffers)[2]) : out_(out), buffers_(buffers) {}
  ~chunk_writer();
  chunk_writer(const chunk_writer&) = delete;
  chunk_writer& operator=(const chunk_writer&) = delete;
  /// The buffer to quantize the next chunk into (free: its last write is done).
  std::vector<std::uint8_t>& buffer() { return buffers_[current_]; }
  /// Writes the buffer's codes; the next buffer() is the other one.
  void write_codes();
  void finish();

 private:
  safetensors::writer& out_;
  std::vector<std::uint8_t> (&buffers_)[2];
  int current_ = 0;
  std::future<void> pending_;
};

}  // namespace qpolicy::checkpoint_io
