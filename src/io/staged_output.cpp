#include "qpolicy/io/detail/staged_output.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "qpolicy/io/io_error.hpp"
#include "crc32c.hpp"

namespace qpolicy {

namespace {

// The temporaries a signal handler must remove: a fixed table of paths (no allocation, no locks in the
// handler). A slot is claimed (0 -> 2), filled, then published (1); the handler unlinks published ones.
constexpr int max_slots = 64;
struct temp_slot {
  std::atomic<int> state{0};
  char path[PATH_MAX];
};
temp_slot slots[max_slots];

/// Blocks the cleanup signals while a temporary is created and registered, so that no temporary
/// exists unregistered when a signal arrives.
class signals_blocked {
 public:
  signals_blocked() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~signals_blocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

int claim_slot(const std::string& path) {
  if (path.size() >= PATH_MAX) throw io_error("cannot create a temporary for", path, ENAMETOOLONG);
  for (int i = 0; i < max_slots; ++i) {
    int free_state = 0;
    if (!slots[i].state.compare_exchange_strong(free_state, 2)) continue;
    std::memcpy(slots[i].path, path.c_str(), path.size() + 1);
    slots[i].state.store(1, std::memory_order_release);
    return i;
  }
  throw io_error("cannot create a temporary for", path, EMFILE);
}

void release_slot(int slot) {
  if (slot >= 0) slots[slot].state.store(0, std::memory_order_release);
}

extern "C" void on_cleanup_signal(int sig) {
  remove_staged_temporaries();
  _exit(128 + sig);
}

std::string directory_of(const std::string& target) {
  const std::filesystem::path p(target);
  return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

/// The mode a new file gets under this process's umask (mkstemp creates 0600).
mode_t new_file_mode() {
  const mode_t mask = ::umask(022);
  ::umask(mask);
  return static_cast<mode_t>(0666 & ~mask);
}

/// fsync and close, reporting the first failure of either.
int sync_and_close(int& fd) {
  int err = 0;
  if (::fsync(fd) != 0 && errno != EINVAL) err = errno;  // EINVAL: a file system without fsync
  if (::close(fd) != 0 && !err) err = errno;
  fd = -1;
  return err;
}

}  // namespace

void remove_staged_temporaries() noexcept {
  for (auto& s : slots)
    if (s.state.load(std::memory_order_acquire) == 1) ::unlink(s.path);
}

void install_signal_cleanup() {
  struct sigaction sa {};
  sa.sa_handler = on_cleanup_signal;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&sa.sa_mask, s);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(s, &sa, nullptr);
  ::signal(SIGXFSZ, SIG_IGN);
}

long stale_temporary_pid(std::string_view name) {
  const auto at = name.rfind(temporary_marker);
  if (at == std::string_view::npos) return 0;
  const auto rest = name.substr(at + temporary_marker.size());  // PID-XXXXXX
  const auto dash = rest.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash > 9 || rest.size() - dash - 1 != 6) return 0;
  long pid = 0;
  for (char c : rest.substr(0, dash)) {
    if (c < '0' || c > '9') return 0;
    pid = pid * 10 + (c - '0');
  }
  if (pid <= 0 || pid == static_cast<long>(::getpid())) return 0;
  if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) return 0;  // running (or not ours to ask)
  return pid;
}

// Large outputs are written back as they grow: each window's write-back starts when it is full, and
// the window `windows_in_flight` before it is waited for and dropped from the page cache. Dirty and
// cached output pages stay within that many windows (page cache, not the process's memory) however
// large the file, the disk works while the kernels do (with several windows queued, so a disk with a
// long round trip stays busy), and the final fsync has little left to do.
constexpr std::uint64_t write_back_window = 32ull << 20;
constexpr std::uint64_t windows_in_flight = 4;

void staged_file::write_back() {
  if (!write_back_ || size_ - started_ < write_back_window) return;
  if (::sync_file_range(fd_, static_cast<off_t>(started_), static_cast<off_t>(size_ - started_), SYNC_FILE_RANGE_WRITE) != 0) {
    if (errno == EIO || errno == ENOSPC) throw io_error("cannot write", target_, errno);
    write_back_ = false;  // not supported here (EINVAL, ESPIPE): fsync at commit does it all
    return;
  }
  started_ = size_;
  while (started_ - settled_ >= windows_in_flight * write_back_window) {
    const auto flags = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
    if (::sync_file_range(fd_, static_cast<off_t>(settled_), static_cast<off_t>(write_back_window), flags) != 0)
      throw io_error("cannot write", target_, errno);
    ::posix_fadvise(fd_, static_cast<off_t>(settled_), static_cast<off_t>(write_back_window), POSIX_FADV_DONTNEED);
    settled_ += write_back_window;
  }
}

void staged_file::write(std::span<const std::byte> bytes) {
  crc_ = qpolicy::crc32c(crc_, bytes);
  const char* p = reinterpret_cast<const char*>(bytes.data());
  std::size_t n = bytes.size();
  while (n > 0) {
    const ssize_t k = ::write(fd_, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      throw io_error("cannot write", target_, errno);
    }
    p += k;
    n -= static_cast<std::size_t>(k);
    size_ += static_cast<std::uint64_t>(k);
  }
  write_back();
}

output_transaction::~output_transaction() {
  if (!committed_) discard();
}

void output_transaction::discard() noexcept {
  for (auto& f : files_) {
    if (f->fd_ >= 0) ::close(f->fd_);
    f->fd_ = -1;
    if (!f->temp_.empty()) ::unlink(f->temp_.c_str());
    release_slot(f->slot_);
    f->slot_ = -1;
  }
}

staged_file& output_transaction::stage(const std::string& target) {
  const auto dir = directory_of(target);
  if (std::find(scanned_dirs_.begin(), scanned_dirs_.end(), dir) == scanned_dirs_.end()) {
    scanned_dirs_.push_back(dir);
    if (DIR* d = ::opendir(dir.c_str())) {
      while (const dirent* e = ::readdir(d))
        if (const long pid = stale_temporary_pid(e->d_name)) {
          const auto path = (std::filesystem::path(dir) / e->d_name).string();
          if (::unlink(path.c_str()) == 0)
            notes_.push_back("removed '" + path + "', a temporary file left by process " + std::to_string(pid) +
                             ", which is no longer running");
        }
      ::closedir(d);
    }
  }
  auto f = std::make_unique<staged_file>();
  f->target_ = target;
  std::string temp = target + std::string(temporary_marker) + std::to_string(::getpid()) + "-XXXXXX";
  {
    signals_blocked blocked;
    const int fd = ::mkostemp(temp.data(), O_CLOEXEC);
    if (fd < 0) throw io_error("cannot create a temporary file beside", target, errno);
    f->fd_ = fd;
    f->temp_ = temp;
    try {
      f->slot_ = claim_slot(temp);
    } catch (...) {
      ::close(fd);
      ::unlink(temp.c_str());
      throw;
    }
  }
  files_.push_back(std::move(f));
  return *files_.back();
}

void output_transaction::commit() {
  const mode_t mode = new_file_mode();
  for (auto& f : files_) {
    if (::fchmod(f->fd_, mode) != 0) throw io_error("cannot set the mode of", f->temp_, errno);
    if (const int err = sync_and_close(f->fd_)) throw io_error("cannot write", f->target_, err);
  }
  for (std::size_t i = 0; i < files_.size(); ++i) {
    if (::rename(files_[i]->temp_.c_str(), files_[i]->target_.c_str()) == 0) continue;
    const int err = errno;
    // Nothing may stay: the outputs already in place go too (their old contents are gone either way).
    for (std::size_t j = 0; j < i; ++j) ::unlink(files_[j]->target_.c_str());
    throw io_error("cannot move the finished file into place at", files_[i]->target_, err);
  }
  committed_ = true;
  for (auto& f : files_) {
    release_slot(f->slot_);
    f->slot_ = -1;
  }
  // Make the renames durable; a directory that cannot be synced leaves the files in place all the same.
  for (const auto& dir : scanned_dirs_)
    if (const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); fd >= 0) {
      ::fsync(fd);
      ::close(fd);
    }
}

}  // namespace qpolicy
