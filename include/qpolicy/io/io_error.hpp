#pragma once
// The error of a file that cannot be read or written: exit status 1 (cli.md), never mistaken for
// invalid input (config_error, exit 2).
#include <stdexcept>
#include <string>

namespace qpolicy {

/// A read, write, create, rename or sync that the operating system refused; names the path and the
/// OS's reason ("cannot write 'out.safetensors': No space left on device").
class io_error : public std::runtime_error {
 public:
  /// `action` says what was attempted ("cannot read the model file"), `err` is errno (0: no reason).
  io_error(const std::string& action, const std::string& path, int err);
  const std::string& path() const { return path_; }
  int os_error() const { return err_; }

 private:
  std::string path_;
  int err_ = 0;
};

}  // namespace qpolicy
