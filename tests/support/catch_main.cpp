// The one Catch2 main of the test programs: compiled once into a static library that every Catch2
// suite links (defining it is the slowest translation unit a test program has). A run for one CPU
// target (QPOLICY_CPU_TARGET) that this CPU does not attain is skipped (meson's status 77), saying so.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "qpolicy/kernels/cpu/cpu_target.hpp"

int main(int argc, char* argv[]) {
  if (const auto problem = qpolicy::cpu::cpu_target_setting_problem()) {
    std::printf("skipped: %s\n", problem->c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
