#pragma once
// Internal to kernels/cpu: how a portable-SIMD kernel file calls the implementation of the active CPU
// target (cpu_target.cpp). A kernel file includes Highway's foreach_target.h, defines its functions in
// HWY_NAMESPACE, exports them with HWY_EXPORT and calls them through QPOLICY_DISPATCH: the best target
// the file compiled among those the active target allows (Highway's own choice would ignore
// QPOLICY_CPU_TARGET, and would be shared with every other Highway user in the process).
#include <cstdint>

#include <hwy/targets.h>

namespace qpolicy::cpu::detail {

/// The Highway targets (HWY_* bits) the active CPU target allows, all of them supported by the CPU.
std::int64_t hwy_allowed_targets();

}  // namespace qpolicy::cpu::detail

#if (HWY_TARGETS & (HWY_TARGETS - 1)) == 0
#define QPOLICY_DISPATCH(FN) HWY_STATIC_DISPATCH(FN)
#else
/// The entry of FN's dispatch table (HWY_EXPORT) for the active target; the fallback entry when the file
/// compiled none of the allowed SIMD targets.
#define QPOLICY_DISPATCH(FN)                                                                                        \
  (*(HWY_DISPATCH_TABLE(FN)[::hwy::Num0BitsBelowLS1Bit_Nonzero64(static_cast<std::uint64_t>(                         \
      (HWY_CHOSEN_TARGET_SHIFT(::qpolicy::cpu::detail::hwy_allowed_targets()) | HWY_CHOSEN_TARGET_MASK_SCALAR) &     \
      HWY_CHOSEN_TARGET_MASK_TARGETS))]))
#endif
