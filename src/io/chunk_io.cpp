#include "chunk_io.hpp"

#include <algorithm>
#include <utility>

namespace qpolicy::checkpoint_io {

namespace {

namespace st = safetensors;

/// Whether `outer`, a range of `file`'s data, holds all of `inner`, one of `of`'s.
bool holds(std::span<const std::byte> outer, const st::file* file, std::span<const std::byte> inner, const st::file* of) {
  return file == of && !outer.empty() && inner.data() >= outer.data() && inner.data() + inner.size() <= outer.data() + outer.size();
}

void reserve_bytes(std::vector<std::uint32_t>& words, std::size_t bytes) {
  if (words.size() < (bytes + 3) / 4) words.resize((bytes + 3) / 4);
}

std::future<void> ready() {
  std::promise<void> done;
  done.set_value();
  return done.get_future();
}

}  // namespace

read_buffers::~read_buffers() {
  if (ahead_pending_.valid()) ahead_pending_.wait();
}

void read_buffers::read_ahead_next() {
  if (!next_ || next_ == ahead_of_) return;
  ahead_of_ = next_;
  const tensor_ref& t = *next_;
  if (ahead_pending_.valid()) ahead_pending_.wait();  // not taken: its result is dropped
  ahead_.held = ahead_.coming = {};
  const auto data = t.file->data(*t.info);
  const auto range = data.first(std::min<std::size_t>(static_cast<std::size_t>(chunk_bytes), data.size()));
  if (range.empty()) return;
  reserve_bytes(ahead_.words, range.size());
  ahead_.coming = range;
  ahead_.file = t.file;
  auto* into = reinterpret_cast<std::byte*>(ahead_.words.data());
  const auto* file = t.file;
  ahead_pending_ = std::async(std::launch::async, [file, range, into] { file->read(range, into); });
}

chunk_reader::chunk_reader(const tensor_ref& t, std::size_t granule, read_buffers& buffers)
    : file_(*t.file), data_(t.file->data(*t.info)), buffers_(buffers) {
  const std::size_t per = std::max<std::size_t>(1, static_cast<std::size_t>(chunk_bytes) / granule) * granule;
  size_ = std::min(per, data_.size());
  for (auto& s : buffers_.slots_) reserve_bytes(s.words, size_);
  start(0, true);
  buffers_.read_ahead_next();
}

chunk_reader::~chunk_reader() {
  if (pending_.valid()) pending_.wait();
}

std::span<const std::byte> chunk_reader::next() {
  if (!pending_.valid()) return {};
  pending_.get();
  auto& s = buffers_.slots_[current_];
  s.held = std::exchange(s.coming, {});  // complete: a later reader may take it
  const std::size_t at = reading_at_, n = std::min(size_, data_.size() - at);
  const auto* bytes = reinterpret_cast<const std::byte*>(s.words.data()) + (data_.data() + at - s.held.data());
  current_ ^= 1;
  start(at + n, false);
  return {bytes, n};
}

void chunk_reader::start(std::size_t at, bool nothing_in_use) {
  reading_at_ = at;
  if (at >= data_.size()) return;
  const auto range = data_.subspan(at, std::min(size_, data_.size() - at));
  auto& b = buffers_;
  auto& s = b.slots_[current_];
  // Held already (this slot, or, while the caller holds nothing, the other one): no read.
  auto& other = b.slots_[current_ ^ 1];
  if (nothing_in_use && holds(other.held, other.file, range, &file_)) std::swap(s, other);
  if (holds(s.held, s.file, range, &file_)) {
    s.coming = std::exchange(s.held, {});
    pending_ = ready();
    return;
  }
  // Read ahead while the previous tensor was worked on: take that buffer and its read.
  if (nothing_in_use && b.ahead_pending_.valid() && holds(b.ahead_.coming, b.ahead_.file, range, &file_) &&
      b.ahead_.words.size() * 4 >= size_) {
    std::swap(s, b.ahead_);
    pending_ = std::move(b.ahead_pending_);
    return;
  }
  s.held = {};
  s.coming = range;
  s.file = &file_;
  auto* into = reinterpret_cast<std::byte*>(s.words.data());
  pending_ = std::async(std::launch::async, [this, range, into] { file_.read(range, into); });
}

chunk_writer::~chunk_writer() {
  if (pending_.valid()) pending_.wait();
}

void chunk_writer::write_codes() {
  finish();
  const auto& codes = buffers_[current_];
  pending_ = std::async(std::launch::async, [this, &codes] { out_.write(std::as_bytes(std::span(codes))); });
  current_ ^= 1;
}

void chunk_writer::finish() {
  if (pending_.valid()) pending_.get();
}

}  // namespace qpolicy::checkpoint_io
