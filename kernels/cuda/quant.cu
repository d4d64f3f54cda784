// CUDA quantization kernels. Thin __global__ templates over the shared per-element arithmetic; int64
// indices throughout (tensors over 2^31 elements); 16-byte loads where the input allows.
#include <cuda_runtime.h>

#include <array>
#include <stdexcept>
#include <utility>

#include "block_reduce.cuh"
#include "qpolicy/kernels/cuda/detail/cuda_check.hpp"
#include "qpolicy/kernels/cuda/device_memory.hpp"
#include "qpolicy/kernels/cuda/block_quantizer.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"
#include "qpolicy/schemes/registry.hpp"

namespace qpolicy::cuda {

using namespace fp8;

namespace {

constexpr int threads_per_block = 256;

using detail::check;
using detail::check_launch;
using detail::stream_of;

/// Reads element i; 64-bit index.
__device__ __forceinline__ float load(const input_view& x, std::int64_t i) { return x.at(i); }

template <bool Propagate>
__device__ float block_amax(float v) {
  return detail::block_amax<Propagate, threads_per_block>(v);
}

/// Elements [first, last) of x: the whole tensor, or segment blockIdx.y's rows when `offsets` (device,
/// [segments + 1] row offsets) is given.
struct element_range {
  std::int64_t first, last;
};
__device__ __forceinline__ element_range range_of(const input_view& x, const std::int64_t* offsets) {
  if (!offsets) return {0, x.size()};
  return {offsets[blockIdx.y] * x.cols, offsets[blockIdx.y + 1] * x.cols};
}

/// Pass 1 of per-tensor paths: atomic max over the magnitudes' bits (non-negative floats order as
/// their bits; a NaN's bits exceed every number's, so amaxT keeps it); one per segment.
template <bool Propagate>
__global__ void amax_kernel(input_view x, const std::int64_t* offsets, std::uint32_t* out) {
  const element_range r = range_of(x, offsets);
  float a = 0.0f;
  for (std::int64_t i = r.first + blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < r.last;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = abs_f32(load(x, i));
    a = Propagate ? max_nan(a, v) : max_num(a, v);
  }
  a = block_amax<Propagate>(a);
  if (threadIdx.x == 0) atomicMax(out + blockIdx.y, bits_of(is_nan(a) ? float_of(0x7FC00000u) : a));
}

/// Pass 2: codes of x * (1/s), s = amax / 448, clampS, sat; 8 elements per step with 16-byte loads of
/// bf16 when aligned; one scale per segment.
__global__ void reciprocal_kernel(input_view x, const std::int64_t* offsets, const std::uint32_t* amax_bits, std::uint8_t* q,
                                  float* scale) {
  const element_range r = range_of(x, offsets);
  const float s = float_of(amax_bits[blockIdx.y]) / max_e4m3;
  const float inv = 1.0f / s;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (first == 0) scale[blockIdx.y] = s;
  const std::int64_t n = r.last - r.first;
  const auto* in_bf16 = static_cast<const std::uint16_t*>(x.data) + r.first;
  const bool vector = x.type == element::bf16 && (reinterpret_cast<std::uintptr_t>(in_bf16) % 16) == 0 &&
                      (reinterpret_cast<std::uintptr_t>(q + r.first) % 8) == 0;
  std::int64_t scalar_from = 0;
  if (vector) {
    const std::int64_t packs = n / 8;
    const auto* in = reinterpret_cast<const uint4*>(in_bf16);
    auto* out = reinterpret_cast<uint2*>(q + r.first);
    for (std::int64_t p = first; p < packs; p += stride) {
      const uint4 v = in[p];
      const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
      std::uint32_t lo = 0, hi = 0;
      for (int k = 0; k < 4; ++k) {
        const std::uint32_t c0 = sat(clamp_s(from_bf16(static_cast<std::uint16_t>(w[k] & 0xFFFFu)) * inv));
        const std::uint32_t c1 = sat(clamp_s(from_bf16(static_cast<std::uint16_t>(w[k] >> 16)) * inv));
        const std::uint32_t pair = c0 | (c1 << 8);
        if (k < 2) lo |= pair << (16 * k);
        else hi |= pair << (16 * (k - 2));
      }
      out[p] = make_uint2(lo, hi);
    }
    scalar_from = packs * 8;
  }
  for (std::int64_t i = r.first + scalar_from + first; i < r.last; i += stride) q[i] = sat(clamp_s(load(x, i) * inv));
}

/// One block per row: per-token (floor MIN_SF, true division, clampS, sat) or per-channel (torch max,
/// true division, clampT, tcvt).
template <bool PerChannel>
__global__ void row_kernel(input_view x, std::uint8_t* q, float* scales) {
  const std::int64_t r = blockIdx.x;
  float a = 0.0f;
  for (std::int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) {
    const float v = abs_f32(load(x, r * x.cols + c));
    a = PerChannel ? max_nan(a, v) : max_num(a, v);
  }
  a = block_amax<PerChannel>(a);
  __shared__ float s_shared;
  if (threadIdx.x == 0)
    s_shared = PerChannel ? max_nan(a / max_e4m3, min_scale_factor()) : max_num(a / max_e4m3, min_scale_factor());
  __syncthreads();
  const float s = s_shared;
  if (threadIdx.x == 0) scales[r] = s;
  for (std::int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) {
    const float v = load(x, r * x.cols + c) / s;
    q[r * x.cols + c] = PerChannel ? tcvt(clamp_t(v)) : sat(clamp_s(v));
  }
}

/// One block per (row, group) of 1x128 groups; scales in the requested layout.
__global__ void group_kernel(input_view x, fp8::group_options o, std::uint8_t* q, float* scales) {
  const std::int64_t groups = x.cols / o.group_size;
  const std::int64_t m = blockIdx.x / groups, g = blockIdx.x % groups;
  const std::int64_t first = m * x.cols + g * o.group_size;
  float a = 0.0f;
  for (std::int64_t k = threadIdx.x; k < o.group_size; k += blockDim.x) a = max_num(a, abs_f32(load(x, first + k)));
  a = block_amax<false>(a);
  __shared__ float y_shared;
  if (threadIdx.x == 0) {
    float y = max_num(group_eps(), a) / max_e4m3;
    if (o.ue8m0) y = ue8m0(max_num(abs_f32(y), group_eps()));
    y_shared = y;
    scales[scale_offset(o.layout, x.rows, groups, m, g)] = y;
  }
  __syncthreads();
  const float y = y_shared;
  for (std::int64_t k = threadIdx.x; k < o.group_size; k += blockDim.x) q[first + k] = tcvt(clamp_g(load(x, first + k) / y));
}

/// One block per 128x128 tile: amaxT with the 1e-4 floor, reciprocal multiply, tcvt, no clamp.
__global__ void block_kernel(input_view w, fp8::block_options o, std::uint8_t* q, float* scales) {
  const std::int64_t col_blocks = (w.cols + 127) / 128;
  const std::int64_t bi = blockIdx.x / col_blocks, bj = blockIdx.x % col_blocks;
  const std::int64_t r0 = bi * 128, c0 = bj * 128;
  const std::int64_t nr = min(static_cast<std::int64_t>(128), w.rows - r0), nc = min(static_cast<std::int64_t>(128), w.cols - c0);
  float a = 0.0f;
  for (std::int64_t k = threadIdx.x; k < nr * nc; k += blockDim.x) a = max_nan(a, abs_f32(load(w, (r0 + k / nc) * w.cols + c0 + k % nc)));
  a = block_amax<true>(a);
  __shared__ float inv_shared;
  if (threadIdx.x == 0) {
    const float floored = max_nan(a, block_floor());
    float sf = o.compiled_variant ? floored * float_of(inv_448_bits) : floored / max_e4m3;
    if (o.ue8m0) sf = ue8m0(sf);
    scales[blockIdx.x] = sf;
    inv_shared = 1.0f / sf;
  }
  __syncthreads();
  const float inv = inv_shared;
  for (std::int64_t k = threadIdx.x; k < nr * nc; k += blockDim.x) {
    const std::int64_t i = (r0 + k / nc) * w.cols + c0 + k % nc;
    q[i] = tcvt(load(w, i) * inv);
  }
}

int grid_for(std::int64_t n) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const std::int64_t wanted = (n + threads_per_block * 8 - 1) / (threads_per_block * 8);
  return static_cast<int>(max(static_cast<std::int64_t>(1), min(wanted, static_cast<std::int64_t>(sms > 0 ? sms * 8 : 1024))));
}

/// Per-tensor quantization of x, or of each of `segments` row segments on its own when `offsets` is given.
void per_tensor(const input_view& x, bool propagate, const std::int64_t* offsets, std::int64_t segments, std::uint8_t* q,
                float* scale, std::uint32_t* scratch, const launch_options& o) {
  if (x.size() == 0 || segments == 0) return;
  if (segments > 65535) throw std::invalid_argument("per-tensor quantization takes at most 65535 segments, got " + std::to_string(segments));
  const auto stream = stream_of(o);
  check(cudaMemsetAsync(scratch, 0, sizeof(std::uint32_t) * static_cast<std::size_t>(segments), stream), "cudaMemsetAsync", o);
  const dim3 grid(static_cast<unsigned>(grid_for(x.size() / segments)), static_cast<unsigned>(segments));
  if (propagate) amax_kernel<true><<<grid, threads_per_block, 0, stream>>>(x, offsets, scratch);
  else amax_kernel<false><<<grid, threads_per_block, 0, stream>>>(x, offsets, scratch);
  check_launch("amax_kernel", o);
  reciprocal_kernel<<<grid, threads_per_block, 0, stream>>>(x, offsets, scratch, q, scale);
  check_launch("reciprocal_kernel", o);
}

}  // namespace

void weight_kernel<fp8_per_tensor>::run(const input_view& w, std::uint8_t* q, float* scale, std::uint32_t* scratch,
                                        const launch_options& o) {
  per_tensor(w, true, nullptr, 1, q, scale, scratch, o);
}

void weight_kernel<fp8_per_channel>::run(const input_view& w, std::uint8_t* q, float* scales, const launch_options& o) {
  if (w.rows == 0) return;
  row_kernel<true><<<static_cast<unsigned>(w.rows), threads_per_block, 0, stream_of(o)>>>(w, q, scales);
  check_launch("row_kernel<per_channel>", o);
}

void weight_kernel<fp8_per_block>::run(const input_view& w, const fp8::block_options& opt, std::uint8_t* q,
                                       float* scales, const launch_options& o) {
  const std::int64_t tiles = ((w.rows + 127) / 128) * ((w.cols + 127) / 128);
  if (tiles == 0) return;
  block_kernel<<<static_cast<unsigned>(tiles), threads_per_block, 0, stream_of(o)>>>(w, opt, q, scales);
  check_launch("block_kernel", o);
}

void activation_kernel<fp8_per_token>::run(const input_view& x, std::uint8_t* q, float* scales, const launch_options& o) {
  if (x.rows == 0) return;
  row_kernel<false><<<static_cast<unsigned>(x.rows), threads_per_block, 0, stream_of(o)>>>(x, q, scales);
  check_launch("row_kernel<per_token>", o);
}

void activation_kernel<fp8_per_tensor_dynamic>::run(const input_view& x, std::uint8_t* q, float* scale,
                                                    std::uint32_t* scratch, const launch_options& o) {
  per_tensor(x, false, nullptr, 1, q, scale, scratch, o);
}

void quantize_segments_per_tensor(const input_view& x, const std::int64_t* offsets, std::int64_t segments, std::uint8_t* q,
                                  float* scales, std::uint32_t* scratch, const launch_options& o) {
  per_tensor(x, false, offsets, segments, q, scales, scratch, o);
}

void activation_kernel<fp8_per_block_dynamic>::run(const input_view& x, const fp8::group_options& opt,
                                                   std::uint8_t* q, float* scales, const launch_options& o) {
  if (opt.group_size <= 0 || x.cols % opt.group_size != 0)
    throw std::invalid_argument("1x128 groups need cols to be a multiple of " + std::to_string(opt.group_size) +
                                ", got " + std::to_string(x.cols) + (o.layer.empty() ? "" : " for layer " + o.layer));
  const std::int64_t blocks = x.rows * (x.cols / opt.group_size);
  if (blocks == 0) return;
  if (opt.layout == scale_layout::column_major_tma)
    check(cudaMemsetAsync(scales, 0, sizeof(float) * scale_storage(opt.layout, x.rows, x.cols / opt.group_size), stream_of(o)),
          "cudaMemsetAsync", o);
  group_kernel<<<static_cast<unsigned>(blocks), 128, 0, stream_of(o)>>>(x, opt, q, scales);
  check_launch("group_kernel", o);
}


template <class Formula>
void quantize(const input_view& x, const quantized_outputs& out, const quantize_options& opt, std::uint32_t* amax_scratch,
              const launch_options& o) {
  constexpr auto& f = schemes::formula_of(Formula::id);
  if constexpr (f.low_precision()) {
    block_quantizer<Formula>::run(x, out, amax_scratch, opt, o);
  } else {
    if (opt.has_amax) throw std::invalid_argument("a given amax is a CPU option of fp8_per_tensor_static");
    using kernel = schemes::fp8_kernel_of<weight_kernel, activation_kernel, Formula>;
    const fp8::block_options blocks{opt.ue8m0, false};
    const fp8::group_options groups{f.group.col, opt.ue8m0, opt.layout};
    auto* s = static_cast<float*>(out.scales);
    // The kernels' signatures differ by what their formula needs: block or group options, an amax scratch.
    if constexpr (requires { kernel::run(x, blocks, out.codes, s, o); }) kernel::run(x, blocks, out.codes, s, o);
    else if constexpr (requires { kernel::run(x, groups, out.codes, s, o); }) kernel::run(x, groups, out.codes, s, o);
    else if constexpr (requires { kernel::run(x, out.codes, s, amax_scratch, o); }) kernel::run(x, out.codes, s, amax_scratch, o);
    else kernel::run(x, out.codes, s, o);
  }
}

// Every formula of the registry: an external table odr-uses each instantiation.
extern const auto quantize_entries = registry::table_of(registry::formula_types, [](auto tag) { return &quantize<decltype(tag)>; });

}  // namespace qpolicy::cuda
