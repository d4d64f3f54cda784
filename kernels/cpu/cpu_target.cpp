// The run-time half of the CPU dispatch point (the compile-time half: detail/isa.hpp): the one place that
// probes the CPU, once, and says which target each kernel runs. Portable-SIMD kernels take the Highway
// targets it allows (hwy_dispatch.hpp); hand-written specializations ask cpu_target_covers().
#include "qpolicy/kernels/cpu/cpu_target.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "hwy_dispatch.hpp"
#include "qpolicy/kernels/cpu/detail/isa.hpp"

#if QPOLICY_X86_KERNELS
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

namespace qpolicy::cpu {

namespace {

/// The Highway targets that implement target t (0 for scalar: Highway's fallback, always compiled).
std::int64_t hwy_bits(cpu_target t) {
  switch (t) {
    case cpu_target::scalar: return 0;
    case cpu_target::sse4: return HWY_SSE4;
    case cpu_target::avx2: return HWY_AVX2;
    case cpu_target::avx3:
    case cpu_target::avx3_zen4:
    case cpu_target::avx3_spr: return HWY_AVX3 | HWY_AVX3_DL;
    case cpu_target::neon: return HWY_NEON;
    case cpu_target::sve: return HWY_SVE | HWY_SVE_256;
    case cpu_target::sve2: return HWY_SVE2 | HWY_SVE2_128;
  }
  return 0;
}

/// The target t extends (the one before it on its architecture), or t itself for scalar.
cpu_target below(cpu_target t) {
  switch (t) {
    case cpu_target::scalar:
    case cpu_target::sse4:
    case cpu_target::neon: return cpu_target::scalar;
    case cpu_target::avx2: return cpu_target::sse4;
    case cpu_target::avx3: return cpu_target::avx2;
    case cpu_target::avx3_zen4: return cpu_target::avx3;
    case cpu_target::avx3_spr: return cpu_target::avx3_zen4;
    case cpu_target::sve: return cpu_target::neon;
    case cpu_target::sve2: return cpu_target::sve;
  }
  return cpu_target::scalar;
}

/// What the hand-written specializations need beyond their Highway target.
struct x86_features {
  bool bf16_and_vbmi = false;  // AVX-512 BF16 and VBMI (avx3_zen4)
  bool amx = false;            // AMX-BF16 and AMX-TILE, the tile state granted (avx3_spr)
};

x86_features probe_x86_features() {
  x86_features f;
#if QPOLICY_X86_KERNELS
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  const bool vbmi = ecx >> 1 & 1u, amx = (edx >> 22 & 1u) && (edx >> 24 & 1u);
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  const bool bf16 = __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 >> 5 & 1u);
  f.bf16_and_vbmi = bf16 && vbmi;
#if defined(__linux__)
  // Linux hands out the 8 KiB tile state only to a process that asks (ARCH_REQ_XCOMP_PERM for
  // XFEATURE_XTILEDATA); where it refuses, the avx3_zen4 kernels do the work.
  f.amx = f.bf16_and_vbmi && amx && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#endif
#endif
  return f;
}

/// Whether this CPU runs target t in this build.
bool attains(cpu_target t, std::int64_t supported, const x86_features& x86) {
  if (t == cpu_target::scalar) return true;
  if (!(hwy_bits(t) & supported & HWY_TARGETS)) return false;
  if (t == cpu_target::avx3_zen4) return x86.bf16_and_vbmi;
  if (t == cpu_target::avx3_spr) return x86.amx;
  return true;
}

struct target_state {
  std::vector<cpu_target> attained;
  std::int64_t supported = 0;  // Highway's targets this CPU supports
  std::atomic<cpu_target> active{cpu_target::scalar};
  std::atomic<std::int64_t> allowed{0};  // the Highway targets the active target allows
};

void activate(target_state& s, cpu_target t) {
  std::int64_t allowed = 0;
  for (cpu_target u = t;; u = below(u)) {
    allowed |= hwy_bits(u);
    if (u == cpu_target::scalar) break;
  }
  s.allowed.store(allowed & s.supported);
  s.active.store(t);
}

/// The probe's result, made once: what the CPU supports and the targets it attains.
target_state& probed() {
  static target_state s;
  static std::once_flag once;
  std::call_once(once, [] {
    s.supported = hwy::SupportedTargets();
    const x86_features x86 = probe_x86_features();
    for (std::size_t i = 0; i < cpu_target_names.size(); ++i)
      if (attains(static_cast<cpu_target>(i), s.supported, x86)) s.attained.push_back(static_cast<cpu_target>(i));
  });
  return s;
}

/// Whether target t is one the probe found this CPU runs.
bool is_attained(const target_state& s, cpu_target t) {
  for (cpu_target a : s.attained)
    if (a == t) return true;
  return false;
}

/// The probe with its active target chosen, once: QPOLICY_CPU_TARGET's when attained, else the best.
target_state& state() {
  target_state& s = probed();
  static std::once_flag chosen;
  std::call_once(chosen, [&s] {
    cpu_target t = s.attained.back();
    const char* setting = std::getenv("QPOLICY_CPU_TARGET");
    if (setting && *setting) {
      const auto named = cpu_target_named(setting);
      if (named && is_attained(s, *named)) t = *named;
      else  // kernels run inside worker threads, where an exception cannot go: named once, then the best
        std::fprintf(stderr, "warning: QPOLICY_CPU_TARGET is '%s', not a target this CPU runs; using '%s'\n", setting,
                     std::string(name_of(t)).c_str());
    }
    activate(s, t);
  });
  return s;
}

std::string attained_list() {
  std::string out;
  for (cpu_target t : attained_cpu_targets()) out += (out.empty() ? "" : ", ") + std::string(name_of(t));
  return out;
}

}  // namespace

const std::vector<cpu_target>& attained_cpu_targets() { return probed().attained; }

cpu_target active_cpu_target() { return state().active.load(std::memory_order_relaxed); }

void set_cpu_target(cpu_target t) {
  target_state& s = state();
  if (is_attained(s, t)) return activate(s, t);
  throw std::invalid_argument("CPU target '" + std::string(name_of(t)) + "' is not one this CPU runs; it runs " + attained_list());
}

bool cpu_target_covers(cpu_target t) {
  for (cpu_target u = active_cpu_target();; u = below(u)) {
    if (u == t) return true;
    if (u == cpu_target::scalar) return false;
  }
}

std::optional<std::string> cpu_target_setting_problem() {
  const char* setting = std::getenv("QPOLICY_CPU_TARGET");
  if (!setting || !*setting) return std::nullopt;
  const auto named = cpu_target_named(setting);
  if (!named) {
    std::string names;
    for (auto n : cpu_target_names) names += (names.empty() ? "'" : ", '") + std::string(n) + "'";
    return "QPOLICY_CPU_TARGET is '" + std::string(setting) + "'; expected one of " + names;
  }
  if (is_attained(probed(), *named)) return std::nullopt;
  return "QPOLICY_CPU_TARGET is '" + std::string(setting) + "', a target this CPU does not run; it runs " + attained_list();
}

namespace detail {
std::int64_t hwy_allowed_targets() { return state().allowed.load(std::memory_order_relaxed); }
}  // namespace detail

}  // namespace qpolicy::cpu
