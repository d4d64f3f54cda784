#pragma once
// The instruction-set targets the CPU kernels run on, and the one place that chooses among them. Each
// hot kernel is written once in portable SIMD (Highway) and compiled for every target of the platform;
// a few hand-written kernels for instructions portable SIMD lacks (AVX-512 BF16 dot products, VBMI
// byte permutes, AMX tiles) are specializations of the x86 targets above avx3. The process runs the
// best target its CPU attains, or the one QPOLICY_CPU_TARGET (or set_cpu_target) names, so that one
// machine tests every target it can run; every target computes the same quantized bits.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qpolicy::cpu {

/// An instruction-set target of the CPU kernels. On x86-64 each is a superset of the ones before it:
/// sse4 (SSE4.2), avx2 (AVX2, FMA, F16C, BMI2), avx3 (AVX-512 F/BW/DQ/VL), avx3_zen4 (avx3 with
/// AVX-512 BF16 and VBMI: the hand-written dot-product and byte-permute kernels), avx3_spr (avx3_zen4
/// with AMX-BF16 tiles granted by the kernel). On arm64: neon, sve, sve2. `scalar` runs one lane
/// everywhere.
enum class cpu_target : std::uint8_t { scalar, sse4, avx2, avx3, avx3_zen4, avx3_spr, neon, sve, sve2 };

/// The targets' names (QPOLICY_CPU_TARGET's values), in the enum's order.
inline constexpr std::array<std::string_view, 9> cpu_target_names = {"scalar", "sse4",  "avx2", "avx3", "avx3_zen4",
                                                                     "avx3_spr", "neon", "sve",  "sve2"};

constexpr std::string_view name_of(cpu_target t) { return cpu_target_names[static_cast<std::size_t>(t)]; }

/// The target named `name`, if any.
constexpr std::optional<cpu_target> cpu_target_named(std::string_view name) {
  for (std::size_t i = 0; i < cpu_target_names.size(); ++i)
    if (cpu_target_names[i] == name) return static_cast<cpu_target>(i);
  return std::nullopt;
}

/// The targets this build runs on this CPU, worst first (always `scalar`, and the best last).
const std::vector<cpu_target>& attained_cpu_targets();

/// The target the kernels run now: QPOLICY_CPU_TARGET's when it names an attained target, else the best.
cpu_target active_cpu_target();

/// Makes the kernels run target `t` from now on (every thread). Throws std::invalid_argument, naming `t`
/// and the targets this CPU attains, when it is not one of them. Not to be called while kernels run.
void set_cpu_target(cpu_target t);

/// Whether the active target is `t` or a superset of it (the same architecture, at least as wide).
bool cpu_target_covers(cpu_target t);

/// QPOLICY_CPU_TARGET's refusal as a sentence, when it is set to a name that is not a target or a target
/// this CPU does not attain (the command line refuses before any work); nullopt when it is unset, empty
/// or attained.
std::optional<std::string> cpu_target_setting_problem();

}  // namespace qpolicy::cpu
