#pragma once
// mma.sync emulated on the CPU, for the tests of the GEMM kernels' tile arithmetic: the kernels' own
// staging, loaders and epilogues run lane by lane, and their fragments are multiplied by an mma.sync
// written from PTX's fragment tables (independently of the loaders' register formulas). Every A and B
// element must come from exactly one lane; products are summed in float64 and added to the lanes'
// float32 accumulators (accumulator i of a lane at row group + 8 when i >= 2, column 2 thread + (i & 1),
// with group = lane / 4 and thread = lane % 4, for every shape here).
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>

#include "qpolicy/numerics/numerics.hpp"

namespace qpolicy::test {

/// A fragment element's place in the A (16 x K) or B (K x 8) operand.
struct mma_position {
  int row, col;
};

/// mma.sync.m16n8k32.row.col.f32.e4m3.e4m3.f32: element i of A (byte i % 4 of register i / 4) sits at
/// row group + 8 when 4 <= i < 8 or i >= 12, column 4 thread + (i & 3) + 16 when i >= 8; element i of B
/// at row 4 thread + (i & 3) + 16 when i >= 4, column group.
struct mma_m16n8k32_e4m3 {
  static constexpr int k = 32, bits = 8, a_elements = 16, b_elements = 8;
  static double value(std::uint32_t code) { return fp8::decode(static_cast<std::uint8_t>(code)); }
  static mma_position a_position(int group, int thread, int i) {
    return {(i < 4 || (i >= 8 && i < 12)) ? group : group + 8, 4 * thread + (i & 3) + (i >= 8 ? 16 : 0)};
  }
  static mma_position b_position(int group, int thread, int i) { return {4 * thread + (i & 3) + (i >= 4 ? 16 : 0), group}; }
};

/// mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32: A element i (half i % 2 of register i / 2) at row
/// group + 8 when i is 2, 3, 6 or 7, column 2 thread + (i & 1) + 8 when i >= 4; B element i at row
/// 2 thread + (i & 1) + 8 when i >= 2, column group.
struct mma_m16n8k16_bf16 {
  static constexpr int k = 16, bits = 16, a_elements = 8, b_elements = 4;
  static double value(std::uint32_t code) { return fp8::from_bf16(static_cast<std::uint16_t>(code)); }
  static mma_position a_position(int group, int thread, int i) {
    return {group + ((i == 2 || i == 3 || i == 6 || i == 7) ? 8 : 0), 2 * thread + (i & 1) + (i >= 4 ? 8 : 0)};
  }
  static mma_position b_position(int group, int thread, int i) { return {2 * thread + (i & 1) + (i >= 2 ? 8 : 0), group}; }
};

/// One mma.sync of `Shape` over the fragments of a warp's 32 lanes; c[lane] points at the lane's four
/// accumulators.
template <class Shape>
void emulate_mma(const std::uint32_t (&a)[32][4], const std::uint32_t (&b)[32][2], std::array<float*, 32> c) {
  constexpr int per_register = 32 / Shape::bits;
  const auto element = [](const std::uint32_t* registers, int i) {
    return Shape::value((registers[i / per_register] >> (Shape::bits * (i % per_register))) & ((std::uint64_t{1} << Shape::bits) - 1));
  };
  double A[16][Shape::k], B[Shape::k][8];
  int seen_a[16][Shape::k] = {}, seen_b[Shape::k][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    const int group = lane >> 2, thread = lane & 3;
    for (int i = 0; i < Shape::a_elements; ++i) {
      const auto [row, col] = Shape::a_position(group, thread, i);
      A[row][col] = element(a[lane], i);
      ++seen_a[row][col];
    }
    for (int i = 0; i < Shape::b_elements; ++i) {
      const auto [row, col] = Shape::b_position(group, thread, i);
      B[row][col] = element(b[lane], i);
      ++seen_b[row][col];
    }
  }
  bool once = true;
  for (auto& r : seen_a)
    for (int v : r) once = once && v == 1;
  for (auto& r : seen_b)
    for (int v : r) once = once && v == 1;
  REQUIRE(once);
  for (int lane = 0; lane < 32; ++lane) {
    const int group = lane >> 2, thread = lane & 3;
    for (int i = 0; i < 4; ++i) {
      const int row = group + (i >= 2 ? 8 : 0), col = 2 * thread + (i & 1);
      double d = 0;
      for (int k = 0; k < Shape::k; ++k) d += A[row][k] * B[k][col];
      c[lane][i] += static_cast<float>(d);
    }
  }
}

/// A warp's mma.sync steps over one staged tile: for each k step and each (m, n) fragment pair, every
/// lane's registers from the kernel's loaders, load_a(m_frag, k_step, lane, regs[4]) and
/// load_b(n_frag, k_step, lane, regs[2]), multiplied into accumulators(m_frag, n_frag, lane).
template <class Shape, class LoadA, class LoadB, class Accumulators>
void emulate_warp_tile(int k_steps, int m_frags, int n_frags, LoadA&& load_a, LoadB&& load_b, Accumulators&& accumulators) {
  for (int ks = 0; ks < k_steps; ++ks)
    for (int mf = 0; mf < m_frags; ++mf)
      for (int nf = 0; nf < n_frags; ++nf) {
        std::uint32_t a[32][4], b[32][2];
        std::array<float*, 32> c{};
        for (int lane = 0; lane < 32; ++lane) {
          load_a(mf, ks, lane, a[lane]);
          load_b(nf, ks, lane, b[lane]);
          c[static_cast<std::size_t>(lane)] = accumulators(mf, nf, lane);
        }
        emulate_mma<Shape>(a, b, c);
      }
}

}  // namespace qpolicy::test
