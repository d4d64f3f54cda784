// The weight-only GEMM kernel: a thin __global__ over numerics/weight_only_tile.hpp. Each CTA stages a
// 128 x 32 tile of bf16 activations and of weights dequantized to bf16 (exact), runs mma.sync
// m16n8k16 bf16 with float32 accumulators over 8 warps, and applies the outer scales in the epilogue.
#include <cuda_runtime.h>

#include <array>
#include <stdexcept>
#include <utility>
#include <vector>

#include "qpolicy/kernels/cuda/detail/cuda_check.hpp"
#include "qpolicy/kernels/cuda/device_memory.hpp"
#include "qpolicy/kernels/cuda/weight_only_gemm.hpp"
#include "qpolicy/schemes/registry.hpp"

namespace qpolicy::cuda {

namespace wo = lp::weight_only;
using schemes::formula;

namespace {

using detail::check;
using detail::check_launch;
using detail::stream_of;

__device__ __forceinline__ void mma_bf16(const std::uint32_t (&a)[4], const std::uint32_t (&b)[2], float* c) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <formula F>
__global__ void __launch_bounds__(wo::threads) weight_only_kernel(wo::problem p, const wo::tile* tiles) {
  __shared__ __align__(16) std::uint16_t stage[wo::stage_elements];
  const wo::tile t = tiles[blockIdx.x];
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.y) * wo::tile_n;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wm = warp / wo::warps_n, wn = warp % wo::warps_n;
  float acc[wo::accumulators] = {};
  for (std::int64_t kt = 0; kt * wo::tile_k < p.k; ++kt) {
    for (int idx = threadIdx.x; idx < wo::tile_m * wo::tile_k; idx += wo::threads) stage[wo::stage_offset(false, idx)] = wo::stage_a(p, t, kt, idx);
    for (int idx = threadIdx.x; idx < wo::tile_n * wo::tile_k; idx += wo::threads)
      stage[wo::stage_offset(true, idx)] = wo::stage_w<F>(p, t.expert, n0, kt, idx);
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < wo::k_steps; ++ks) {
      std::uint32_t a[wo::m_frags][4], b[wo::n_frags][2];
#pragma unroll
      for (int mf = 0; mf < wo::m_frags; ++mf) wo::load_a(stage, wm, mf, ks, lane, a[mf]);
#pragma unroll
      for (int nf = 0; nf < wo::n_frags; ++nf) wo::load_b(stage, wn, nf, ks, lane, b[nf]);
#pragma unroll
      for (int mf = 0; mf < wo::m_frags; ++mf)
#pragma unroll
        for (int nf = 0; nf < wo::n_frags; ++nf) mma_bf16(a[mf], b[nf], acc + wo::acc_index(mf, nf, 0));
    }
    __syncthreads();
  }
  wo::store_outputs(p, t, n0, wm, wn, lane, acc);
}

}  // namespace

template <class Formula>
void weight_only_gemm_tiles(const wo::problem& p, const wo::tile* tiles, std::int64_t tile_count, const launch_options& o) {
  constexpr formula F = Formula::id;
  static_assert(schemes::formula_of(F).weight, "the weight-only GEMM takes a weight formula");
  if (const auto why = wo::can_implement(schemes::formula_of(F), p.n, p.k); !why.empty())
    throw std::invalid_argument(why + (o.layer.empty() ? "" : " (layer " + o.layer + ")"));
  if (tile_count == 0) return;
  const std::int64_t column_tiles = (p.n + wo::tile_n - 1) / wo::tile_n;
  if (tile_count > 0x7FFFFFFF || column_tiles > 65535)
    throw std::invalid_argument("the weight-only GEMM takes at most 65535 x 128 output columns, got N = " + std::to_string(p.n));
  const dim3 grid(static_cast<unsigned>(tile_count), static_cast<unsigned>(column_tiles));
  weight_only_kernel<F><<<grid, wo::threads, 0, stream_of(o)>>>(p, tiles);
  check_launch("weight_only_kernel", o);
}

template <class Formula>
void weight_only_gemm(const wo::problem& p, const std::int64_t* offsets, std::int64_t experts, const launch_options& o) {
  const auto tiles = fp8::grouped::make_tiles(offsets, experts);
  if (tiles.empty()) return;
  device_memory table(tiles.size() * sizeof(wo::tile));
  check(cudaMemcpyAsync(table.get(), tiles.data(), tiles.size() * sizeof(wo::tile), cudaMemcpyHostToDevice, stream_of(o)),
        "cudaMemcpyAsync (tile table)", o);
  weight_only_gemm_tiles<Formula>(p, table.as<wo::tile>(), static_cast<std::int64_t>(tiles.size()), o);
  // The tile table is freed on return: wait for the kernel that reads it.
  check(cudaStreamSynchronize(stream_of(o)), "cudaStreamSynchronize", o);
}

// Every weight formula of the weight-only GEMM in the registry: an external table odr-uses each.
extern const auto weight_only_entries = registry::table_of(registry::weight_only_formula_types, [](auto tag) {
  using formula = decltype(tag);
  return std::pair{&weight_only_gemm<formula>, &weight_only_gemm_tiles<formula>};
});

}  // namespace qpolicy::cuda
