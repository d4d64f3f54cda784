#pragma once
// Internal to the `qpolicy` executable: the errors every command maps to exit statuses, and the
// commands that live in their own files.
#include <stdexcept>
#include <string>
#include <vector>

namespace qpolicy::cli {

/// Bad command line (exit 1, with the usage text).
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// A file that cannot be read or written (exit 1).
struct io_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// `qpolicy quantize-tensor ARGS...` (ARGS after the command name); returns the exit status.
int quantize_tensor(const std::vector<std::string>& args);

}  // namespace qpolicy::cli
