#pragma once
// All-or-nothing output: each file a run writes goes to a temporary beside its target, named
// TARGET.qpolicy-tmp-PID-XXXXXX; commit() syncs and closes every one (any failure counts) and only
// then renames them all into place. A transaction destroyed before commit, a failed commit, or
// SIGINT/SIGTERM/SIGHUP (with install_signal_cleanup) removes every temporary; a later run removes
// the temporaries of writers that are no longer running.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qpolicy {

/// One output being written: bytes go to the temporary, in order.
class staged_file {
 public:
  void write(std::span<const std::byte> bytes);
  void write(std::string_view text) { write(std::as_bytes(std::span(text.data(), text.size()))); }
  const std::string& target() const { return target_; }
  const std::string& temporary() const { return temp_; }
  std::uint64_t size() const { return size_; }
  /// The CRC-32C of every byte written so far.
  std::uint32_t crc32c() const { return crc_; }

 private:
  friend class output_transaction;
  void write_back();
  std::string target_, temp_;
  int fd_ = -1;
  int slot_ = -1;  // in the signal handler's table
  std::uint64_t size_ = 0;
  std::uint32_t crc_ = 0;
  // Streaming write-back: bytes whose write-back has been started, and bytes written back and let go
  // of by the page cache; a file system without sync_file_range turns it off.
  std::uint64_t started_ = 0, settled_ = 0;
  bool write_back_ = true;
};

/// The outputs of one run; none appears unless all are complete.
class output_transaction {
 public:
  output_transaction() = default;
  ~output_transaction();
  output_transaction(const output_transaction&) = delete;
  output_transaction& operator=(const output_transaction&) = delete;

  /// Creates the temporary for `target` (removing stale ones of dead writers in its directory first).
  staged_file& stage(const std::string& target);
  /// fsync and close every temporary, then rename each into place; on any failure nothing stays:
  /// the temporaries and the outputs already renamed are removed, and io_error says what failed.
  void commit();
  /// Sentences about stale temporaries removed (for the caller to print as notes).
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  void discard() noexcept;
  std::vector<std::unique_ptr<staged_file>> files_;
  std::vector<std::string> scanned_dirs_;
  std::vector<std::string> notes_;
  bool committed_ = false;
};

/// For programs: SIGINT, SIGTERM and SIGHUP remove every staged temporary and exit with 128 + the
/// signal; SIGXFSZ is ignored, so a write over the file size limit fails with EFBIG (io_error).
void install_signal_cleanup();

/// Removes every staged temporary of this process; async-signal-safe, for a host program's own
/// signal handler when it does not call install_signal_cleanup.
void remove_staged_temporaries() noexcept;

/// The marker in temporary names, and the stale-temporary test on a file name: the pid of a writer
/// that is no longer running, or 0.
inline constexpr std::string_view temporary_marker = ".qpolicy-tmp-";
long stale_temporary_pid(std::string_view file_name);

}  // namespace qpolicy
