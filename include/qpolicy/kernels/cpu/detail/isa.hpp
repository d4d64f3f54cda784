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

/// Element loops cloned per x86-64 level, chosen at load time (an ifunc): x86-64-v4 (AVX-512), v3
/// (AVX2), AVX without AVX2, v2 (SSE4.2) and the baseline; wider vectors, the same IEEE operations, so
/// the same bits. For the loops that have no portable-SIMD kernel, on GCC, which clones by level;
/// elsewhere the compiler's own vectorization. FMA is never formed: these files compile with
/// -ffp-contract=off, and the reference adds each product after rounding it.
#if QPOLICY_X86_KERNELS && !defined(__clang__)
#define QPOLICY_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "avx", "arch=x86-64-v2", "default")))
#else
#define QPOLICY_CPU_CLONES
#endif
