#pragma once
// Every path a run reads or writes, checked before any work: inputs must be regular files (a FIFO or
// device would block or stream, a directory is a mistake), outputs must not be an input, another
// output, or anything but a regular file (writing by rename would replace a device or a FIFO).
#include <string>
#include <string_view>
#include <vector>

namespace qpolicy {

/// A path with the role it plays in messages ("-o", "--config-out", "input", "the model file").
struct role_path {
  std::string path;
  std::string role;
};

/// Checks that `path` names a regular file without opening it (so a FIFO cannot block): a directory,
/// FIFO, device or socket is config_error (exit 2); a missing or unreachable file is io_error (exit 1).
void check_input_file(const std::string& path, std::string_view role);

/// Reads a whole input file (a config, model, or checkpoint index) after check_input_file; the open
/// never blocks. io_error for a failed open or read.
std::string read_input_file(const std::string& path, std::string_view role);

/// A path to be created: its directory must exist and be a directory (io_error "cannot create ROLE
/// 'PATH': its directory 'DIR': REASON" otherwise).
void check_parent_directory(const std::string& path, std::string_view role);

/// Refuses, with config_error (exit 2) naming both paths, an output that is the same file as an input
/// (device and inode: symlinks and hard links included) or as another output, and an existing output
/// that is not a regular file. An output's directory must exist (io_error otherwise). Inputs are
/// checked with check_input_file first.
void check_run_paths(const std::vector<role_path>& inputs, const std::vector<role_path>& outputs);

}  // namespace qpolicy
