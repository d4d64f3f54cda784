#include "crc32c.hpp"

#include <array>
#include <cstring>

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <nmmintrin.h>
#endif

namespace qpolicy {

namespace {

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto table = make_table();

std::uint32_t by_table(std::uint32_t c, const unsigned char* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c;
}

/// The operator that appends zero bytes to a CRC register, as a 32x32 matrix over GF(2) (column j: the
/// image of bit j), and its application.
using gf2_matrix = std::array<std::uint32_t, 32>;

std::uint32_t times(const gf2_matrix& m, std::uint32_t v) {
  std::uint32_t sum = 0;
  for (int j = 0; v != 0; v >>= 1, ++j)
    if (v & 1) sum ^= m[static_cast<std::size_t>(j)];
  return sum;
}

gf2_matrix squared(const gf2_matrix& m) {
  gf2_matrix s;
  for (std::size_t j = 0; j < 32; ++j) s[j] = times(m, m[j]);
  return s;
}

/// Appending `bytes` zero bytes (a power of two) to a register, as four byte tables: the register's
/// byte i looked up in table i, the four results xor'd.
struct zeros_shift {
  std::array<std::array<std::uint32_t, 256>, 4> table;
  explicit zeros_shift(std::size_t bytes) {
    gf2_matrix op;  // one zero bit: the reflected polynomial's step
    op[0] = 0x82F63B78u;
    for (std::size_t j = 1; j < 32; ++j) op[j] = 1u << (j - 1);
    for (std::size_t bits = 1; bits < bytes * 8; bits *= 2) op = squared(op);
    for (std::uint32_t v = 0; v < 256; ++v)
      for (std::size_t i = 0; i < 4; ++i) table[i][v] = times(op, v << (8 * i));
  }
  std::uint32_t operator()(std::uint32_t c) const { return table[0][c & 0xFF] ^ table[1][c >> 8 & 0xFF] ^ table[2][c >> 16 & 0xFF] ^ table[3][c >> 24]; }
};

#if QPOLICY_X86_KERNELS
__attribute__((target("sse4.2"))) std::uint64_t crc_words(std::uint64_t c, const unsigned char* p, std::size_t n) {
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  return c;
}

/// The crc32 instruction has a latency of three of its issues: three streams of `lane` bytes side by
/// side keep it busy, then the first two registers are moved past the bytes after them (zeros_shift)
/// and xor'd in, which is the CRC of the three streams in a row.
__attribute__((target("sse4.2"))) std::uint32_t by_instruction(std::uint32_t c, const unsigned char* p, std::size_t n) {
  constexpr std::size_t lane = 8192;
  static const zeros_shift past_lane(lane);
  std::uint64_t c64 = c;
  for (; n >= 3 * lane; n -= 3 * lane, p += 3 * lane) {
    std::uint64_t c1 = 0, c2 = 0;
    for (std::size_t i = 0; i < lane; i += 8) {
      std::uint64_t w0, w1, w2;
      std::memcpy(&w0, p + i, 8);
      std::memcpy(&w1, p + lane + i, 8);
      std::memcpy(&w2, p + 2 * lane + i, 8);
      c64 = _mm_crc32_u64(c64, w0);
      c1 = _mm_crc32_u64(c1, w1);
      c2 = _mm_crc32_u64(c2, w2);
    }
    c64 = past_lane(static_cast<std::uint32_t>(c64)) ^ static_cast<std::uint32_t>(c1);
    c64 = past_lane(static_cast<std::uint32_t>(c64)) ^ static_cast<std::uint32_t>(c2);
  }
  c64 = crc_words(c64, p, n);
  p += n / 8 * 8;
  n %= 8;
  c = static_cast<std::uint32_t>(c64);
  for (; n > 0; --n, ++p) c = _mm_crc32_u8(c, *p);
  return c;
}
#endif

}  // namespace

std::uint32_t crc32c(std::uint32_t crc, std::span<const std::byte> bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::uint32_t c = ~crc;
#if QPOLICY_X86_KERNELS
  if (cpu::cpu_target_covers(cpu::cpu_target::sse4)) return ~by_instruction(c, p, bytes.size());
#endif
  return ~by_table(c, p, bytes.size());
}

}  // namespace qpolicy
