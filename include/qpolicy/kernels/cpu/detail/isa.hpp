#pragma once
// The compile-time half of the CPU dispatch point (the run-time half: kernels/cpu/cpu_target.cpp): which
// hand-written specializations this build compiles. Every other file asks these macros, never the
// compiler's architecture macros, and a specialization runs only where cpu_target_covers() says so.
#include "qpolicy/kernels/cpu/cpu_target.hpp"

/// 1 where the x86-64 specializations (AVX-512 BF16, VBMI, AMX, F16C, SSE4.2 CRC) are compiled: x86-64
/// with GCC or clang, whose target attributes and intrinsics they use.
#if defined(__x86_64__) && defined(__GNUC__)
#define QPOLICY_X86_KERNELS 1
#else
#define QPOLICY_X86_KERNELS 0
#endif
