// Compile-only: every real-world idiom of tests/regex/idioms.hpp, on every name, answered during
// constant evaluation exactly as regex.match answers (the bits are checked against the package by
// tests/regex/check_idioms.py), and a catastrophic pattern stopped by the step budget at compile time.
#include "qpolicy/match/pattern.hpp"
#include "../regex/idioms.hpp"

namespace qp = qpolicy;
using qp::match::glob_mode;
using qp::match::match_one;

consteval int idiom_mismatches() {
  int wrong = 0;
  for (const auto& i : qpolicy_tests::idioms) {
    std::uint32_t k = 0;
    for (const auto& name : qpolicy_tests::idiom_names) {
      const auto r = match_one(i.pattern, name, glob_mode::on);
      if (r.error || r.matched != (((i.matches >> k) & 1) != 0)) ++wrong;
      ++k;
    }
  }
  return wrong;
}
static_assert(idiom_mismatches() == 0, "a real-world idiom matches differently from regex.match at compile time");

// (a+)+\1$ backtracks exponentially on a's and a final b: the budget ends it with the error.
consteval bool catastrophic_stops_with_the_budget_error() {
  const auto r = match_one("re:(a+)+\\1$", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", glob_mode::on);
  return r.error && r.error->unsupported && r.error->message.find("100000 backtracking steps") != std::string::npos &&
         r.error->message.find("'re:(a+)+\\\\1$'") != std::string::npos;
}
static_assert(catastrophic_stops_with_the_budget_error());

int main() { return 0; }
