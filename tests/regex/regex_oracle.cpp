// The C++ side of the differential test against the `regex` package (differential.py): reads one JSON
// array [pattern, name] per line and answers, per line, "1" / "0" (matched at the start or not, as
// regex.match), "E <message>" (a compile error, as the package words it) or "U <message>" (valid for
// the package, refused by qpolicy). Each answer is computed three ways -- the reference NFA and
// backtracker, the runtime lazy DFA, and the compile-time planner's DFA -- and a disagreement between
// them is reported as "X ...", which the test counts as a failure.
#include <boost/json.hpp>

#include <iostream>
#include <string>

#include "qpolicy/match/pattern_set.hpp"

namespace json = boost::json;
using namespace qpolicy::match;

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    boost::system::error_code ec;
    const auto v = json::parse(line, ec);
    if (ec || !v.is_array() || v.as_array().size() != 2) {
      std::cout << "X bad input line\n";
      continue;
    }
    const std::string pattern = "re:" + std::string(v.as_array()[0].as_string());
    const std::string name(v.as_array()[1].as_string());
    const auto one = match_one(pattern, name, glob_mode::on);
    std::string answer;
    if (one.error && (one.error->unsupported || one.error->message.rfind("qpolicy stopped", 0) == 0))
      answer = "U " + one.error->message;
    else if (one.error) answer = "E " + one.error->message;
    else answer = one.matched ? "1" : "0";
    if (!one.error) {
      pattern_set fast(compile_patterns({pattern}, glob_mode::on));
      dfa_pattern_set plain(compile_patterns({pattern}, glob_mode::on));
      // Twice through the runtime set: the second call resumes from the cached prefix state.
      const bool a = fast.match(name).test(0), b = fast.match(name).test(0);
      pattern_hits h;
      plain.match(name, h);
      if (a != one.matched || b != one.matched || h.test(0) != one.matched) answer = "X engines disagree";
    }
    for (auto& c : answer)
      if (c == '\n') c = ' ';
    std::cout << answer << '\n';
  }
  return 0;
}
