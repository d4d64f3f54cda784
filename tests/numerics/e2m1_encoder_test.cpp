// The AVX-512 e2m1 encode (include/qpolicy/kernels/cpu/detail/e2m1_avx512.hpp), which every MXFP4 and
// NVFP4 row kernel on x86-64 uses, against the formula's scalar encode (lp::e2m1_encode) on every float32
// bit pattern: NaN, infinities, subnormals, each tie and both signs.
#include <catch2/catch.hpp>

#include <cstdint>
#include <thread>
#include <vector>

#include "qpolicy/kernels/cpu/detail/e2m1_avx512.hpp"
#include "qpolicy/numerics/block_formats.hpp"
#include "qpolicy/numerics/numerics.hpp"

namespace {

namespace fp8 = qpolicy::fp8;
namespace lp = qpolicy::lp;

#ifdef QPOLICY_E2M1_AVX512
// GCC 12's intrinsic headers build some results from an "undefined" register, which
// -Wmaybe-uninitialized reports once inlined here: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
/// Mismatches over the bit patterns [first, last) (a multiple of 16 apart), the first one in `where`.
__attribute__((target("avx512f"))) std::uint64_t mismatches(std::uint64_t first, std::uint64_t last, std::uint64_t& where) {
  std::uint64_t bad = 0;
  alignas(64) std::uint32_t got[16];
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (std::uint64_t base = first; base < last; base += 16) {
    const __m512i bits = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(base))), lanes);
    _mm512_store_si512(got, qpolicy::cpu::detail::e2m1_codes_avx512(_mm512_castsi512_ps(bits)));
    for (int i = 0; i < 16; ++i) {
      const float v = fp8::float_of(static_cast<std::uint32_t>(base) + static_cast<std::uint32_t>(i));
      if (got[i] != lp::e2m1_encode(v) && bad++ == 0) where = base + static_cast<std::uint64_t>(i);
    }
  }
  return bad;
}
#pragma GCC diagnostic pop
#endif

}  // namespace

TEST_CASE("AVX-512 e2m1 encode: every float32 equals the scalar encode", "[numerics][encoder]") {
#ifdef QPOLICY_E2M1_AVX512
  if (!__builtin_cpu_supports("avx512f")) {
    WARN("skipped: this CPU has no AVX-512; the e2m1 encode is the scalar one here");
    return;
  }
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const std::uint64_t total = std::uint64_t{1} << 32, share = total / threads / 16 * 16;
  std::vector<std::uint64_t> bad(threads), where(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { bad[t] = mismatches(t * share, t + 1 == threads ? total : (t + 1) * share, where[t]); });
  for (auto& th : pool) th.join();
  for (unsigned t = 0; t < threads; ++t) {
    INFO("first mismatch at float bits 0x" << std::hex << where[t]);
    CHECK(bad[t] == 0);
  }
#else
  WARN("skipped: the AVX-512 e2m1 encode is built only by x86-64 GCC");
#endif
}
