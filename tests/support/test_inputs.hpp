#pragma once
// What meson test hands the test programs: environment variables naming the qpolicy executable and the
// shared conformance files (../shared/conformance/*.json), each file parsed once per program.
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "files.hpp"

namespace qpolicy::test {

/// The value of environment variable `name`; a test failure naming it when it is unset.
inline std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v) FAIL("environment variable " << name << " is not set (run the tests through meson test)");
  return v;
}

/// A property test's random rounds: `full`, or fewer where QPOLICY_PROPERTY_ROUNDS says so (an emulated
/// run, about 20 times slower); a test keeps every kind of check within the rounds it runs.
inline int property_rounds(int full) {
  const char* v = std::getenv("QPOLICY_PROPERTY_ROUNDS");
  if (!v || !*v) return full;
  const int n = std::atoi(v);
  if (n < 1) FAIL("QPOLICY_PROPERTY_ROUNDS is '" << v << "'; expected a whole number of rounds, 1 or more");
  return n < full ? n : full;
}

/// Whether QPOLICY_PROPERTY_ROUNDS asks for fewer rounds (an emulated run): exhaustive sweeps then take a
/// stride through their inputs.
inline bool fewer_rounds() {
  const char* v = std::getenv("QPOLICY_PROPERTY_ROUNDS");
  return v && *v;
}

/// The JSON document at the path in environment variable `variable`; a test failure naming the
/// variable and the path when the file cannot be read.
inline boost::json::value json_file_from_env(const char* variable) {
  const auto path = required_env(variable);
  if (!std::filesystem::is_regular_file(path)) FAIL("cannot read " << variable << "=" << path);
  return boost::json::parse(slurp(path));
}

/// The "cases" array of the conformance file named by environment variable `variable`, parsed once.
inline const boost::json::array& conformance_cases(const char* variable) {
  static std::map<std::string, boost::json::value, std::less<>> documents;
  auto [it, added] = documents.try_emplace(variable);
  if (added) it->second = json_file_from_env(variable);
  return it->second.at("cases").as_array();
}

/// That file's cases of `kind`, in file order; a test failure when there is none.
inline std::vector<const boost::json::object*> conformance_cases_of_kind(const char* variable, std::string_view kind) {
  std::vector<const boost::json::object*> out;
  for (const auto& c : conformance_cases(variable))
    if (c.at("kind").as_string() == kind) out.push_back(&c.as_object());
  INFO(variable << " has no case of kind " << kind);
  REQUIRE_FALSE(out.empty());
  return out;
}

}  // namespace qpolicy::test
