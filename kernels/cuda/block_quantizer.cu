// CUDA kernels of the low-precision quantizers: thin __global__ templates over the shared block
// arithmetic (numerics/quantize_blocks.hpp). One thread per 32- or 16-block for the block formulas
// (a block's values in registers), one CUDA block per row for the per-row formulas (INT8 scales,
// NVFP4 per-token scales); int64 indices throughout.
#include <cuda_runtime.h>

#include <array>
#include <stdexcept>
#include <utility>

#include "block_reduce.cuh"
#include "qpolicy/kernels/cuda/detail/cuda_check.hpp"
#include "qpolicy/kernels/cuda/device_memory.hpp"
#include "qpolicy/kernels/cuda/block_quantizer.hpp"
#include "qpolicy/schemes/registry.hpp"

namespace qpolicy::cuda {

using schemes::formula;

namespace {

constexpr int threads_per_block = 256;

using detail::check;
using detail::check_launch;
using detail::stream_of;

/// One thread per (row, block) of a block formula. NVFP4 weights read the matrix's amax bits from
/// `amax_bits` (the previous kernel's result) for their global scale.
template <formula F>
__global__ void block_kernel(input_view x, lp::block_outputs out, const std::uint32_t* amax_bits) {
  constexpr int block = static_cast<int>(schemes::formula_of(F).block());
  const std::int64_t per_row = x.cols / block, blocks = x.rows * per_row;
  float encode = 0.0f;
  if constexpr (F == formula::nvfp4_weight) {
    encode = lp::nvfp4_global_scale(fp8::float_of(*amax_bits));
    if (blockIdx.x == 0 && threadIdx.x == 0) *out.tensor_scale = 1.0f / encode;
  }
  for (std::int64_t b = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; b < blocks;
       b += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = b / per_row, j = b % per_row, first = r * x.cols + j * block;
    float v[block];
    for (int i = 0; i < block; ++i) v[i] = x.at(first + i);
    out.block_scales[lp::block_scale_offset(r, j, per_row, out.swizzled)] = lp::quantize_block<F>(v, encode, out.codes, first);
  }
}

/// A rotating formula (new-schemes §A): one thread per (row, 32-block of the quantizer), its 32 outputs
/// rotated from their `size`-column block (the fused multiply-add chain of numerics/detail/hadamard.hpp,
/// rounded once to x's dtype), then the base formula's block function.
template <formula F>
__global__ void rotated_block_kernel(input_view x, lp::block_outputs out, std::int64_t size) {
  constexpr int block = static_cast<int>(schemes::formula_of(F).block());
  const std::int64_t per_row = x.cols / block, blocks = x.rows * per_row;
  const float c = lp::hadamard_magnitude(size);
  for (std::int64_t b = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; b < blocks;
       b += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = b / per_row, j = b % per_row, first = r * x.cols + j * block;
    const std::int64_t column = j * block, start = column / size * size;  // the rotation block holding this block
    float v[block];
    const auto load = [&](std::int64_t i) { return x.at(r * x.cols + start + i); };
    for (int o = 0; o < block; ++o) v[o] = lp::round_to(x.type, lp::rotated_f32(load, size, column - start + o, c));
    out.block_scales[lp::block_scale_offset(r, j, per_row, out.swizzled)] = lp::quantize_block<F>(v, 0.0f, out.codes, first);
  }
}

/// LUT-B (new-schemes §B.3): one thread per 8x64 tile, the tile's fit in the thread's local memory.
__global__ void lut_b_kernel(input_view x, lp::block_outputs out) {
  const std::int64_t k_tiles = x.cols / lp::lut_cols, tiles = x.rows / lp::lut_rows * k_tiles;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < tiles;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = t / k_tiles * lp::lut_rows, col = t % k_tiles * lp::lut_cols;
    float tile[lp::lut_elements];
    for (int r = 0; r < lp::lut_rows; ++r)
      for (int k = 0; k < lp::lut_cols; ++k) tile[r * lp::lut_cols + k] = x.at(row + r, col + k);
    lp::lut_scratch scratch;
    out.block_scales[t] = lp::lut_b_tile(tile, scratch, out.codes + t * lp::lut_packed_bytes, out.codebook + t * lp::lut_entries);
  }
}

/// LUT-B decode (§B.4): one thread per element, bf16 or fp16 bits.
__global__ void lut_b_dequantize_kernel(const std::uint8_t* packed, const std::uint8_t* codebooks, const std::uint8_t* scales,
                                        std::int64_t rows, std::int64_t cols, bool f16, std::uint16_t* out) {
  const std::int64_t k_tiles = cols / lp::lut_cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < rows * cols;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t n = i / cols, k = i % cols, tile = n / lp::lut_rows * k_tiles + k / lp::lut_cols;
    const float v = lp::lut_value(packed + tile * lp::lut_packed_bytes, codebooks + tile * lp::lut_entries, scales[tile],
                                  static_cast<int>(n % lp::lut_rows), static_cast<int>(k % lp::lut_cols));
    out[i] = f16 ? lp::to_fp16(v) : fp8::to_bf16(v);
  }
}

/// A row-wise formula's decode (dequantize): one thread per element over the decode the CPU shares
/// (dq::element_value), rounded once to the output type T.
template <element T>
__global__ void dequantize_kernel(dq::decode_layout l, stored_tensors in, void* out) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < in.rows * in.cols;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = dq::element_value(l, in, i / in.cols, i % in.cols);
    if constexpr (T == element::f32) static_cast<float*>(out)[i] = v;
    else if constexpr (T == element::bf16) static_cast<std::uint16_t*>(out)[i] = fp8::to_bf16(v);
    else static_cast<std::uint16_t*>(out)[i] = lp::to_fp16(v);
  }
}

/// The Hadamard rotation alone (§A.3): one thread per element, as float32 values of x's dtype grid.
__global__ void rotate_kernel(input_view x, std::int64_t size, float* out) {
  const float c = lp::hadamard_magnitude(size);
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < x.size();
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / x.cols, column = i % x.cols, start = column / size * size;
    out[i] = lp::round_to(x.type, lp::rotated_f32([&](std::int64_t k) { return x.at(r * x.cols + start + k); }, size, column - start, c));
  }
}

/// NVFP4 weights, pass 1: amaxT of the whole matrix as the bits of a non-negative float (they order
/// like the values; a NaN, stored as the quiet NaN, exceeds them all).
__global__ void amax_kernel(input_view x, std::uint32_t* amax_bits) {
  float a = 0.0f;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < x.size();
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    a = fp8::max_nan(a, fp8::abs_f32(x.at(i)));
  a = detail::block_amax<true, threads_per_block>(a);
  if (threadIdx.x == 0) atomicMax(amax_bits, fp8::bits_of(fp8::is_nan(a) ? fp8::float_of(0x7FC00000u) : a));
}

/// One CUDA block per row: INT8 per-channel (amaxT, scale in the model dtype, one code per element) or
/// NVFP4 per-token (amaxN, the token's scale, one 16-block per thread).
template <formula F>
__global__ void row_kernel(input_view x, lp::block_outputs out) {
  constexpr bool int8 = F == formula::int8_per_channel;
  const std::int64_t r = blockIdx.x, first = r * x.cols;
  float a = 0.0f;
  for (std::int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) {
    const float v = fp8::abs_f32(x.at(first + c));
    a = int8 ? fp8::max_nan(a, v) : fp8::max_num(a, v);
  }
  a = detail::block_amax<int8, threads_per_block>(a);
  __shared__ float row_scale;
  if (threadIdx.x == 0) {
    row_scale = int8 ? lp::int8_scale(x.type, a) : lp::nvfp4_token_scale(a);
    out.row_scales[r] = row_scale;
  }
  __syncthreads();
  const float s = row_scale;
  if constexpr (int8) {
    auto* q = reinterpret_cast<std::int8_t*>(out.codes);
    for (std::int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) q[first + c] = lp::int8_code(x.type, x.at(first + c), s);
  } else {
    const float encode = 1.0f / s;  // a zero row gives +inf
    const std::int64_t per_row = x.cols / lp::nv_block;
    for (std::int64_t j = threadIdx.x; j < per_row; j += blockDim.x) {
      float v[lp::nv_block];
      for (int i = 0; i < lp::nv_block; ++i) v[i] = x.at(first + j * lp::nv_block + i);
      out.block_scales[lp::block_scale_offset(r, j, per_row, out.swizzled)] =
          lp::quantize_block<F>(v, encode, out.codes, first + j * lp::nv_block);
    }
  }
}

unsigned grid_for(std::int64_t items) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const std::int64_t wanted = (items + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(max(static_cast<std::int64_t>(1), min(wanted, static_cast<std::int64_t>(sms > 0 ? sms * 16 : 2048))));
}

}  // namespace

template <class Formula>
void block_quantizer<Formula>::run(const input_view& x, const quantized_outputs& quantized, std::uint32_t* amax_scratch,
                                   const quantize_options& q, const launch_options& o) {
  constexpr formula F = Formula::id;
  constexpr auto& f = schemes::formula_of(F);
  const lp::block_outputs out = lp::block_outputs_of(f, quantized, q);
  if (x.size() == 0) return;
  const std::int64_t size = out.transform_size ? out.transform_size : f.transform_size;
  if (!schemes::takes_shape(f, x.rows, x.cols) || (size && (!lp::is_hadamard_size(size) || x.cols % size != 0)))
    throw std::invalid_argument(std::string(f.name) + " cannot take a [" + std::to_string(x.rows) + ", " + std::to_string(x.cols) +
                                "] tensor: " + schemes::block_message(f, x.cols, x.rows) + (o.layer.empty() ? "" : " for layer " + o.layer));
  const auto stream = stream_of(o);
  if constexpr (F == formula::lut_b) {
    lut_b_kernel<<<grid_for(x.rows / lp::lut_rows * (x.cols / lp::lut_cols)), 64, 0, stream>>>(x, out);
    check_launch("lut_b_kernel", o);
  } else if constexpr (f.transform == schemes::pre_transform::hadamard) {
    rotated_block_kernel<F><<<grid_for(x.rows * (x.cols / f.block())), threads_per_block, 0, stream>>>(x, out, size);
    check_launch("rotated_block_kernel (Hadamard)", o);
  } else if constexpr (F == formula::int8_per_channel || F == formula::nvfp4_per_token) {
    if (x.rows > 0x7FFFFFFF) throw std::invalid_argument(std::string(f.name) + " takes at most 2^31 - 1 rows");
    row_kernel<F><<<static_cast<unsigned>(x.rows), threads_per_block, 0, stream>>>(x, out);
    check_launch("row_kernel (low precision)", o);
  } else {
    if constexpr (F == formula::nvfp4_weight) {
      if (q.has_amax) {
        // The bits as the amax kernel leaves them: a non-negative float's bits order as its value.
        const std::uint32_t bits = fp8::bits_of(q.amax);
        check(cudaMemcpyAsync(amax_scratch, &bits, sizeof bits, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync (amax)", o);
        check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (amax)", o);  // `bits` is a stack value
      } else {
        check(cudaMemsetAsync(amax_scratch, 0, sizeof(std::uint32_t), stream), "cudaMemsetAsync", o);
        amax_kernel<<<grid_for(x.size() / 8), threads_per_block, 0, stream>>>(x, amax_scratch);
        check_launch("amax_kernel (NVFP4 weights)", o);
      }
    }
    block_kernel<F><<<grid_for(x.rows * (x.cols / f.block())), threads_per_block, 0, stream>>>(x, out, amax_scratch);
    check_launch("block_kernel (low precision)", o);
  }
}

void lut_b_dequantize(const std::uint8_t* packed, const std::uint8_t* codebooks, const std::uint8_t* scales, std::int64_t rows,
                      std::int64_t cols, element out_type, std::uint16_t* out, const launch_options& o) {
  if (rows == 0 || cols == 0) return;
  lut_b_dequantize_kernel<<<grid_for(rows * cols), threads_per_block, 0, stream_of(o)>>>(packed, codebooks, scales, rows, cols,
                                                                                       out_type == element::f16, out);
  check_launch("lut_b_dequantize_kernel", o);
}

void dequantize(formula id, const stored_tensors& in, element out_type, void* out, const launch_options& o) {
  const auto& f = schemes::formula_of(id);
  if (f.codes == schemes::code_format::lut3_tiles) {
    if (out_type == element::f32) throw std::invalid_argument("LUT-B decodes to bf16 or fp16 (§B.4), not float32");
    lut_b_dequantize(in.codes, in.codebooks, static_cast<const std::uint8_t*>(in.scales), in.rows, in.cols, out_type,
                     static_cast<std::uint16_t*>(out), o);
    return;
  }
  if (in.rows == 0 || in.cols == 0) return;
  const auto l = dq::layout_of(f, in.rows, in.cols, in.swizzled);
  const auto grid = grid_for(in.rows * in.cols);
  const auto stream = stream_of(o);
  if (out_type == element::f32) dequantize_kernel<element::f32><<<grid, threads_per_block, 0, stream>>>(l, in, out);
  else if (out_type == element::bf16) dequantize_kernel<element::bf16><<<grid, threads_per_block, 0, stream>>>(l, in, out);
  else dequantize_kernel<element::f16><<<grid, threads_per_block, 0, stream>>>(l, in, out);
  check_launch("dequantize_kernel", o);
}

void hadamard_rotate(const input_view& x, std::int64_t size, float* out, const launch_options& o) {
  if (x.size() == 0) return;
  rotate_kernel<<<grid_for(x.size()), threads_per_block, 0, stream_of(o)>>>(x, size, out);
  check_launch("rotate_kernel (Hadamard)", o);
}

// Every low-precision formula of the registry: an external table odr-uses each kernel.
extern const auto block_quantizer_entries = registry::table_of(registry::block_quantizer_formula_types, [](auto tag) { return &block_quantizer<decltype(tag)>::run; });

}  // namespace qpolicy::cuda
