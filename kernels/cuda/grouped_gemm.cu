// The grouped FP8 GEMM kernel: a thin __global__ over the tile arithmetic of fp8/grouped_tile.hpp,
// with what only the device has: cp.async double buffering and the mma.sync instruction.
#include <cuda_runtime.h>

#include <stdexcept>

#include "qpolicy/kernels/cuda/detail/cuda_check.hpp"
#include "qpolicy/kernels/cuda/device_info.hpp"
#include "qpolicy/kernels/cuda/grouped_gemm.hpp"

namespace qpolicy::cuda {

namespace {

namespace g = fp8::grouped;
using detail::check;
using detail::stream_of;

__device__ __forceinline__ void copy_16(std::uint8_t* dst, const std::uint8_t* src, bool valid) {
  const auto d = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  // src-size 0 copies nothing and fills the 16 bytes with zeros.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ __forceinline__ void wait_stages() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

__device__ __forceinline__ void mma_e4m3(float* c, const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // grouped_can_implement refuses devices below sm 89
#endif
}

/// A warp's products of one staged K tile, added to `sums`.
__device__ __forceinline__ void multiply_stage(const std::uint8_t* s, int wm, int wn, int lane, float (&sums)[g::accumulators]) {
#pragma unroll
  for (int ks = 0; ks < g::k_steps; ++ks) {
    std::uint32_t b[g::n_frags][2];
#pragma unroll
    for (int nf = 0; nf < g::n_frags; ++nf) g::load_b(s, wn, nf, ks, lane, b[nf]);
#pragma unroll
    for (int mf = 0; mf < g::m_frags; ++mf) {
      std::uint32_t a[4];
      g::load_a(s, wm, mf, ks, lane, a);
#pragma unroll
      for (int nf = 0; nf < g::n_frags; ++nf) mma_e4m3(&sums[g::acc_index(mf, nf, 0)], a, b[nf]);
    }
  }
}

template <class Scaling>
__global__ void __launch_bounds__(g::threads, 1) grouped_gemm_kernel(g::problem p, const g::tile* tiles) {
  constexpr bool blocked = std::is_same_v<Scaling, g::block_scales>;
  extern __shared__ __align__(16) std::uint8_t smem[];
  const g::tile t = tiles[blockIdx.x];
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.y) * g::tile_n;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wm = warp / g::warps_n, wn = warp % g::warps_n;
  const std::int64_t k_tiles = (p.k + g::tile_k - 1) / g::tile_k;

  auto stage = [&](std::int64_t kt) {
    std::uint8_t* s = smem + (kt % g::stages) * g::stage_bytes;
    for (int c = threadIdx.x; c < g::chunks; c += g::threads) {
      const g::chunk ch = g::chunk_of(c);
      const g::chunk_source src = g::source_of(ch, p, t, n0, kt);
      const std::uint8_t* from = src.valid ? (ch.weight ? p.w : p.a) + src.offset : p.a;
      copy_16(s + ch.smem_offset(), from, src.valid);
    }
    commit();
  };

  float acc[g::accumulators];
  float partial[blocked ? g::accumulators : 1];
  for (float& v : acc) v = 0.0f;
  stage(0);
  for (std::int64_t kt = 0; kt < k_tiles; ++kt) {
    if (kt + 1 < k_tiles) {
      stage(kt + 1);
      wait_stages<1>();
    } else {
      wait_stages<0>();
    }
    __syncthreads();
    const std::uint8_t* s = smem + (kt % g::stages) * g::stage_bytes;
    if constexpr (blocked) {
      for (float& v : partial) v = 0.0f;
      multiply_stage(s, wm, wn, lane, partial);
    } else {
      multiply_stage(s, wm, wn, lane, acc);
    }
    if constexpr (blocked) {
      float row_scales[g::m_frags][2];
      g::chunk_row_scales(p, t, wm, lane, kt, row_scales);
      g::fold_chunk(partial, row_scales, g::w_scale_of(p, t.expert, n0, kt), acc);
    }
    __syncthreads();  // the next iteration's stage overwrites the buffer read here
  }
  g::store_outputs<Scaling>(p, t, n0, wm, wn, lane, acc);
}

constexpr int smem_bytes = g::stages * g::stage_bytes;

template <class Scaling>
void launch(const g::problem& p, const g::tile* tiles, std::int64_t tile_count, const launch_options& o) {
  // Over 48 KiB of dynamic shared memory needs the opt-in; set once per specialization.
  static const cudaError_t opt_in =
      cudaFuncSetAttribute(grouped_gemm_kernel<Scaling>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  check(opt_in, "cudaFuncSetAttribute (grouped GEMM shared memory)", o);
  const dim3 grid(static_cast<unsigned>(tile_count), static_cast<unsigned>((p.n + g::tile_n - 1) / g::tile_n));
  grouped_gemm_kernel<Scaling><<<grid, g::threads, smem_bytes, stream_of(o)>>>(p, tiles);
  check(cudaGetLastError(), "grouped_gemm_kernel", o);
}

}  // namespace

std::string grouped_can_implement(const g::problem& p, int sm) {
  if (sm < 89) return "the grouped FP8 GEMM needs FP8 tensor cores (compute capability 8.9 or newer), this device is " +
                      std::to_string(sm / 10) + "." + std::to_string(sm % 10);
  return g::can_implement(p.n, p.k, p.activation, p.weights);
}

void grouped_gemm(const g::problem& p, const g::tile* tiles, std::int64_t tile_count, const launch_options& o) {
  if (auto why = grouped_can_implement(p, current_sm()); !why.empty())
    throw std::invalid_argument(why + (o.layer.empty() ? std::string() : " (layer " + o.layer + ")"));
  if (tile_count == 0) return;
  if ((p.n + g::tile_n - 1) / g::tile_n > 65535)
    throw std::invalid_argument("the grouped FP8 GEMM takes at most 65535 column tiles, N = " + std::to_string(p.n));
  if (p.weights == fp8::weight_scales::block_128x128) launch<g::block_scales>(p, tiles, tile_count, o);
  else launch<g::outer_scales>(p, tiles, tile_count, o);
}

}  // namespace qpolicy::cuda
