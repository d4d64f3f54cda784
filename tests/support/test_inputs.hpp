#pragma once
// What meson test hands the test programs: environment variables naming the qpolicy executable and the
// shared conformance files (../shared/conformance/*.json), each file parsed once per program.
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "files.hpp"

namespace qpolicy::test {

/// The value of environment variable `name`; a test failure naming it when it is unset.
inline std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v) FAIL("environment variable " << name << " is not set (run the tests through meson test)");
  return v;
}

/// The JSON document at the path in environment variable `variable`; a test failure naming the
/// variable and the path when the file cannot be read.
inline boost::json::value json_file_from_env(const char* variable) {
  const auto path = required_env(variable);
  if (!std::filesystem::is_regular_file(path)) FAIL("cannot read " << variable << "=" << path);
  return boost::json::parse(slurp(path));
}

}  // namespace qpolicy::test
