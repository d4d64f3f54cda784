#pragma once
// Test helper: a fresh directory under the temp dir, removed with everything in it when the test ends.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace qpolicy::test {

/// A directory of its own for one test; removed (recursively) on destruction.
class temp_dir {
 public:
  explicit temp_dir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("qpolicy-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace qpolicy::test
