#pragma once
// Internal to decode_gemm_avx512.cpp: the decode-batch GEMM's sixteen-row tiles on AMX. Each 32-element
// step of sixteen weight rows is decoded into bf16 words (decode_rows_avx512.hpp) and stored as the A
// tile (16 rows of 64 bytes); the step's activations, in AMX's pair-interleaved layout, are the B tile
// (16 rows of M pairs); tdpbf16ps adds their products into a 16 x M float32 tile. One tdpbf16ps does
// the products of 16 M vdpbf16ps, so the decoders, not the products, set the pace at decode batches.
// Like vdpbf16ps, tdpbf16ps reads and writes subnormals as zero and rounds to nearest even, so it takes
// the same exact operands (all_exact rows).
#include "decode_rows_avx512.hpp"

#include "qpolicy/kernels/cpu/detail/isa.hpp"
#if QPOLICY_X86_KERNELS
#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#define QPOLICY_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi,amx-tile,amx-bf16")))

namespace qpolicy::cpu::detail::decode_tiles {

// GCC 12's intrinsic headers build some results from an "undefined" register (see e4m3_avx512.hpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

using decode_rows::step;
using decode_rows::decodes_step_pairs;
using decode_rows::pair_order;
using decode_rows::pair_order_of;

// The tile instructions, tile numbers as template arguments, as statements GCC keeps in order with the
// memory they read and write: GCC 12's intrinsics tell it that ldtilecfg reads 8 bytes and that
// tileloadd and tilestored touch no memory, so it dropped the stores of a configuration.
template <int Tile>
inline void tile_load(const void* base, std::int64_t stride) {
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(base), "r"(stride), "i"(Tile) : "memory");
}
template <int Tile>
inline void tile_store(void* base, std::int64_t stride) {
  __asm__ volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(base), "r"(stride), "i"(Tile) : "memory");
}
template <int Tile>
inline void tile_zero() {
  __asm__ volatile("tilezero %%tmm%c0" ::"i"(Tile));
}
/// Tile Sums += tile A times tile B (bf16 pairs, float32 sums).
template <int Sums, int A, int B>
inline void tile_dot_bf16() {
  __asm__ volatile("tdpbf16ps %%tmm%c0, %%tmm%c1, %%tmm%c2" ::"i"(B), "i"(A), "i"(Sums));
}

/// Weight rows per tile (an A tile's rows), and the most tiles of them a pass takes (one float32 tile
/// each; every pass shares each step's activation tile among them).
inline constexpr std::int64_t tile_rows = 16;
inline constexpr int max_tiles = 4;

/// The activations of every step in AMX's B layout: step t's tile row r holds, for each activation row
/// i, the words of elements e(t, 2 r) and e(t, 2 r + 1) (zero past k), where e(t, j) is 32 t + j, or
/// with an `order` the element of pair t / 2 that the weights' word j of step t holds (the steps then
/// come in pairs). In K order, with each pair of words one 32-bit unit, that is x's [m, k / 2] units
/// transposed.
struct paired_activations {
  std::int64_t m;
  std::vector<std::uint32_t> pairs;
  paired_activations(const std::uint16_t* x, std::int64_t m, std::int64_t k, pair_order order)
      : m(m), pairs(static_cast<std::size_t>(decode_rows::steps_of(k, order != nullptr) * (step / 2) * m)) {
    const std::int64_t steps = decode_rows::steps_of(k, order != nullptr);
    for (std::int64_t i = 0; i < m; ++i) {
      const std::uint16_t* row = x + i * k;
      const auto word = [&](std::int64_t e) { return e < k ? std::uint32_t{row[e]} : 0u; };
      for (std::int64_t t = 0; t < steps; ++t)
        for (std::int64_t r = 0; r < step / 2; ++r)
          pairs[static_cast<std::size_t>((t * (step / 2) + r) * m + i)] =
              word(decode_rows::element_of(order, t, 2 * r)) | word(decode_rows::element_of(order, t, 2 * r + 1)) << 16;
    }
  }
  /// Step t's B tile, and the bytes between its rows.
  const std::uint32_t* at(std::int64_t t) const { return pairs.data() + t * (step / 2) * m; }
  std::int64_t stride() const { return 4 * m; }
};

/// The tile configuration of `scope`: tiles 0..3 the float32 sums (16 rows of m floats) of up to four
/// weight tiles, 4 and 5 the A tiles (decoded weights, alternating), 6 and 7 the B tiles (activations,
/// alternating by step).
struct alignas(64) tile_config {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
  explicit tile_config(std::int64_t m) {
    for (int t = 0; t < 8; ++t) {
      rows[t] = tile_rows;
      bytes_per_row[t] = static_cast<std::uint16_t>(t == 4 || t == 5 ? 2 * step : 4 * m);
    }
  }
};

/// Loads the tile configuration for m activation rows on this thread and releases the tiles when done
/// (the next context switch then need not save them).
struct tile_scope {
  explicit tile_scope(std::int64_t m) {
    const tile_config config(m);
    __asm__ volatile("ldtilecfg %0" ::"m"(config));
  }
  ~tile_scope() { __asm__ volatile("tilerelease" ::); }
  tile_scope(const tile_scope&) = delete;
  tile_scope& operator=(const tile_scope&) = delete;
};

/// The decoders of G tiles of weight rows, tile g's row r at [g * 16 + r].
template <class Row, int G>
using rows_of_tiles = std::array<Row, G * tile_rows>;

/// How far ahead in its own stream each row's codes are fetched: a pass interleaves 64 streams, more
/// than the hardware prefetcher follows, and 64 rows times this stay within L1.
inline constexpr std::ptrdiff_t prefetch_bytes = 512;

/// Decodes rows [16 g, 16 g + 16)'s elements [k0, k0 + count) into `a` (16 rows of 32 words), and
/// prefetches each row's codes prefetch_bytes on.
template <int G, class Row>
QPOLICY_AMX __attribute__((always_inline)) inline void decode_step(const rows_of_tiles<Row, G>& rows, int g, std::int64_t k0, std::int64_t count,
                                                                 std::uint16_t* a) {
  for (std::size_t r = 0; r < tile_rows; ++r) {
    const Row& row = rows[static_cast<std::size_t>(g) * tile_rows + r];
    _mm_prefetch(reinterpret_cast<const char*>(row.code_at(k0)) + prefetch_bytes, _MM_HINT_T0);
    _mm512_store_si512(a + r * step, row.words(k0, count));
  }
}

/// Decodes elements [k0, k0 + count) (count <= 64) of every tile of the pass as two steps, into a[0][g]
/// and a[1][g], in the row's pair order; prefetches each row's codes prefetch_bytes on.
template <int G, class Row>
QPOLICY_AMX __attribute__((always_inline)) inline void decode_pass_step_pair(const rows_of_tiles<Row, G>& rows, std::int64_t k0, std::int64_t count,
                                                                           std::uint16_t (&a)[2][G][tile_rows * step]) {
  for (int g = 0; g < G; ++g)
    for (std::size_t r = 0; r < tile_rows; ++r) {
      const Row& row = rows[static_cast<std::size_t>(g) * tile_rows + r];
      _mm_prefetch(reinterpret_cast<const char*>(row.code_at(k0)) + prefetch_bytes, _MM_HINT_T0);
      __m512i first, second;
      row.word_pair(k0, count, first, second);
      _mm512_store_si512(a[0][g] + r * step, first);
      _mm512_store_si512(a[1][g] + r * step, second);
    }
}

/// decode_pass_step_pair of pair p of k elements: a whole pair with a constant count, so that the
/// decoders' checks of a partial block fold away.
template <int G, class Row>
QPOLICY_AMX __attribute__((always_inline)) inline void decode_pair_of(const rows_of_tiles<Row, G>& rows, std::int64_t k, std::int64_t p,
                                                                    std::uint16_t (&a)[2][G][tile_rows * step]) {
  const std::int64_t k0 = p * 2 * step;
  if (k - k0 >= 2 * step) decode_pass_step_pair<G>(rows, k0, 2 * step, a);
  else decode_pass_step_pair<G>(rows, k0, k - k0, a);
}

/// Decodes step k0 of every tile of the pass into a[g] (16 rows of 32 words each).
template <int G, class Row>
QPOLICY_AMX __attribute__((always_inline)) inline void decode_pass_step(const rows_of_tiles<Row, G>& rows, std::int64_t k0, std::int64_t count,
                                                                      std::uint16_t (&a)[G][tile_rows * step]) {
  for (int g = 0; g < G; ++g) decode_step<G>(rows, g, k0, count, a[g]);
}

/// Each tile's decoded step a[T] into A tile 4 + T % 2, times B tile `B`, into sums T.
template <int B, int G, int... Tile>
QPOLICY_AMX __attribute__((always_inline)) inline void multiply_pass_step(const std::uint16_t (&a)[G][tile_rows * step],
                                                                        std::integer_sequence<int, Tile...>) {
  ((tile_load<4 + Tile % 2>(a[Tile], 2 * step), tile_dot_bf16<Tile, 4 + Tile % 2, B>()), ...);
}

/// For m activation rows, the lane pattern of each vector of a sums tile stored flat (element r m + i
/// at 16 v + lane): vector v's lane holds i = (16 v + lane) % m, so that a vector of per-row scales
/// permuted by it lines up with the sums.
struct row_lanes {
  __m512i of_vector[tile_rows];
  QPOLICY_AMX explicit row_lanes(std::int64_t m) {
    for (std::int64_t v = 0; v < m; ++v) {
      alignas(64) std::int32_t lanes[16];
      for (std::int64_t l = 0; l < 16; ++l) lanes[l] = static_cast<std::int32_t>((16 * v + l) % m);
      of_vector[v] = _mm512_load_si512(lanes);
    }
  }
};

/// Adds sums tile T (16 rows of m floats, 16 m = m vectors) into acc (rows 16 T ...), each row i's sum
/// times scale[i] when given (16 floats; the product rounded before the sum, as a scalar loop would).
template <int T>
QPOLICY_AMX inline void add_sums(std::int64_t m, const row_lanes& lanes, const float* scale, float* acc) {
  alignas(64) float sums[tile_rows * 16];
  tile_store<T>(sums, 4 * m);
  float* out = acc + T * tile_rows * 16;
  const __m512 scales = scale ? _mm512_loadu_ps(scale) : _mm512_setzero_ps();
  for (std::int64_t v = 0; v < m; ++v) {
    __m512 term = _mm512_load_ps(sums + 16 * v);
    if (scale) term = _mm512_mul_ps(term, _mm512_permutexvar_ps(lanes.of_vector[v], scales));
    _mm512_store_ps(out + 16 * v, _mm512_add_ps(_mm512_load_ps(out + 16 * v), term));
  }
}

/// y[i, n0 + j] = sum_k x[i, k] w[n0 + j, k] for the 16 G weight rows (every block exact) and the
/// m <= 16 activation rows, on a thread inside a tile_scope of m: one pass over K, each step's
/// activation tile loaded once for the G weight tiles. With group scales (the block-scaled FP8 GEMM),
/// each 128-wide chunk's sums are scaled before they are added.
template <int G, class Row>
QPOLICY_AMX void tile_sums(const rows_of_tiles<Row, G>& rows, const paired_activations& x, std::int64_t k, std::int64_t n0,
                           const group_scales* groups, float* y, std::int64_t ldy) {
  static_assert(G >= 1 && G <= max_tiles);
  constexpr auto tiles = std::make_integer_sequence<int, G>();
  const std::int64_t m = x.m, steps = decode_rows::steps_of(k, decodes_step_pairs<Row>);
  alignas(64) float acc[G * tile_rows * 16] = {};
  const row_lanes lanes(m);
  const auto each_tile = [&](auto&& f) { [&]<int... T>(std::integer_sequence<int, T...>) { (f(std::integral_constant<int, T>()), ...); }(tiles); };
  each_tile([]<int T>(std::integral_constant<int, T>) { tile_zero<T>(); });
  // Software-pipelined: step t + 1 is decoded and stored before step t's tiles are loaded, so that a
  // tile load does not wait on the stores just before it (tileloadd takes no data from the store buffer).
  const auto chunk_done = [&](std::int64_t t) {  // after step t; with group scales, K is whole 128-wide chunks
    if (!groups || (t + 1) % 4 != 0) return;
    const std::int64_t chunk = (t * step) / 128;
    each_tile([&]<int T>(std::integral_constant<int, T>) {
      const float ws = groups->w_scale[((n0 + T * tile_rows) / 128) * groups->chunks + chunk];
      float scale[16] = {};
      for (std::int64_t i = 0; i < m; ++i) scale[i] = groups->a_scale[i * groups->chunks + chunk] * ws;
      add_sums<T>(m, lanes, scale, acc);
      tile_zero<T>();
    });
  };
  if constexpr (decodes_step_pairs<Row>) {
    // Pairs of steps, pipelined likewise: pair p + 1 decoded and stored before pair p's tiles are loaded.
    alignas(64) std::uint16_t pair[2][2][G][tile_rows * step];  // by pair parity, then step, then tile
    const std::int64_t pairs = steps / 2;
    decode_pair_of<G>(rows, k, 0, pair[0]);
    for (std::int64_t p = 0; p < pairs; ++p) {
      if (p + 1 < pairs) decode_pair_of<G>(rows, k, p + 1, pair[(p + 1) % 2]);
      tile_load<6>(x.at(2 * p), x.stride());
      multiply_pass_step<6>(pair[p % 2][0], tiles);
      chunk_done(2 * p);
      tile_load<7>(x.at(2 * p + 1), x.stride());
      multiply_pass_step<7>(pair[p % 2][1], tiles);
      chunk_done(2 * p + 1);
    }
  } else {
    alignas(64) std::uint16_t a[2][G][tile_rows * step];  // by step parity, then tile
    const auto count_at = [&](std::int64_t t) { return std::min(step, k - t * step); };
    decode_pass_step<G>(rows, 0, count_at(0), a[0]);
    for (std::int64_t t = 0; t < steps; t += 2) {
      if (t + 1 < steps) decode_pass_step<G>(rows, (t + 1) * step, count_at(t + 1), a[1]);
      tile_load<6>(x.at(t), x.stride());
      multiply_pass_step<6>(a[0], tiles);
      chunk_done(t);
      if (t + 1 >= steps) break;
      if (t + 2 < steps) decode_pass_step<G>(rows, (t + 2) * step, count_at(t + 2), a[0]);
      tile_load<7>(x.at(t + 1), x.stride());
      multiply_pass_step<7>(a[1], tiles);
      chunk_done(t + 1);
    }
  }
  if (!groups) each_tile([&]<int T>(std::integral_constant<int, T>) { add_sums<T>(m, lanes, nullptr, acc); });
  for (std::int64_t g = 0; g < G; ++g)
    for (std::int64_t r = 0; r < tile_rows; ++r)
      for (std::int64_t i = 0; i < m; ++i) y[i * ldy + n0 + g * tile_rows + r] = acc[g * tile_rows * 16 + r * m + i];
}

#pragma GCC diagnostic pop

}  // namespace qpolicy::cpu::detail::decode_tiles

#endif
