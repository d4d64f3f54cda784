#include "qpolicy/io/detail/paths.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "qpolicy/config/config.hpp"
#include "qpolicy/io/io_error.hpp"

namespace qpolicy {

io_error::io_error(const std::string& action, const std::string& path, int err)
    : std::runtime_error(action + " '" + path + "'" + (err ? std::string(": ") + std::strerror(err) : std::string())),
      path_(path),
      err_(err) {}

namespace {

/// "a directory", "a FIFO", ... for a mode that is not a regular file.
std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/// What a path names: the file itself when it exists, else (its directory, its name).
struct identity {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  mode_t mode = 0;
  std::string name;  // for a file that does not exist yet: its name in that directory
  bool operator==(const identity& o) const { return exists == o.exists && dev == o.dev && ino == o.ino && name == o.name; }
};

identity identify_output(const role_path& p) {
  struct stat st {};
  if (::stat(p.path.c_str(), &st) == 0) return {true, st.st_dev, st.st_ino, st.st_mode, {}};
  if (errno != ENOENT) throw io_error("cannot check " + p.role, p.path, errno);
  // Not there yet: it is (its directory, its name); the directory must exist.
  check_parent_directory(p.path, p.role);
  const std::filesystem::path path(p.path);
  struct stat ds {};
  ::stat(path.has_parent_path() ? path.parent_path().c_str() : ".", &ds);
  return {false, ds.st_dev, ds.st_ino, ds.st_mode, path.filename().string()};
}

}  // namespace

void check_parent_directory(const std::string& path, std::string_view role) {
  const std::filesystem::path p(path);
  const auto dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
  struct stat ds {};
  const std::string what = "cannot create " + std::string(role) + " '" + path + "': its directory";
  if (::stat(dir.c_str(), &ds) != 0) throw io_error(what, dir, errno);
  if (!S_ISDIR(ds.st_mode)) throw io_error(what, dir, ENOTDIR);
}

void check_input_file(const std::string& path, std::string_view role) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw io_error("cannot read " + std::string(role), path, errno);
  if (S_ISREG(st.st_mode)) return;
  throw config_error("", std::string(role) + " '" + path + "' is " + kind_of(st.st_mode) + "; expected a regular file");
}

std::string read_input_file(const std::string& path, std::string_view role) {
  check_input_file(path, role);
  // O_NONBLOCK: should the path have become a FIFO since the check, the open still returns at once.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw io_error("cannot read " + std::string(role), path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    if (!S_ISREG(st.st_mode)) throw config_error("", std::string(role) + " '" + path + "' is not a regular file");
    throw io_error("cannot read " + std::string(role), path, err);
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw io_error("error while reading " + std::string(role), path, err);
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

void check_run_paths(const std::vector<role_path>& inputs, const std::vector<role_path>& outputs) {
  std::vector<identity> in_ids;
  for (const auto& in : inputs) {
    check_input_file(in.path, in.role);
    struct stat st {};
    if (::stat(in.path.c_str(), &st) != 0) throw io_error("cannot read " + in.role, in.path, errno);
    in_ids.push_back({true, st.st_dev, st.st_ino, st.st_mode, {}});
  }
  std::vector<identity> out_ids;
  for (const auto& out : outputs) {
    const auto id = identify_output(out);
    if (id.exists && !S_ISREG(id.mode))
      throw config_error("", out.role + " '" + out.path + "' is " + kind_of(id.mode) +
                                 (S_ISDIR(id.mode) ? "; expected a file path"
                                                    : ", not a regular file; qpolicy writes an output by renaming a finished "
                                                      "file onto its path, which would replace it"));
    for (std::size_t i = 0; i < in_ids.size(); ++i)
      if (id == in_ids[i])
        throw config_error("", out.role + " '" + out.path + "' is the same file as " + inputs[i].role + " '" + inputs[i].path +
                                   "'; writing it would destroy the input");
    for (std::size_t i = 0; i < out_ids.size(); ++i)
      if (id == out_ids[i])
        throw config_error("", out.role + " '" + out.path + "' is the same file as " + outputs[i].role + " '" +
                                   outputs[i].path + "'; each output needs its own path");
    out_ids.push_back(id);
  }
}

}  // namespace qpolicy
