// The one Catch2 main of the test programs: compiled once into a static library that every Catch2
// suite links (defining it is the slowest translation unit a test program has). A run for one CPU
// target (QPOLICY_CPU_TARGET) that this CPU does not attain, or that is its best (the run without the
// variable takes it), is skipped (meson's status 77), saying so.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>

#include "qpolicy/kernels/cpu/cpu_target.hpp"

int main(int argc, char* argv[]) {
  if (const auto problem = qpolicy::cpu::cpu_target_setting_problem()) {
    std::printf("skipped: %s\n", problem->c_str());
    return 77;
  }
  // A run forced to the best target repeats the run that takes it by default.
  const char* forced = std::getenv("QPOLICY_CPU_TARGET");
  if (forced && *forced && qpolicy::cpu::cpu_target_named(forced) == qpolicy::cpu::attained_cpu_targets().back()) {
    std::printf("skipped: QPOLICY_CPU_TARGET is '%s', the best target this CPU runs: the run without it covers it\n", forced);
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
