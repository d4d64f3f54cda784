#pragma once
// CUDA quantization kernels, one specialization per scheme tag, mirroring the CPU fast path
// (kernels/cpu/vectorized.hpp): same formulas through the shared __host__ __device__ arithmetic, so codes
// and scales are bit-identical to the CPU reference. Pointers are device pointers; every CUDA error
// becomes a qpolicy::cuda::cuda_error naming the call and the layer. Plain header: no CUDA types, so
// host code without nvcc can include it (kernels/cuda/availability.hpp: what a build without CUDA does).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "qpolicy/kernels/cuda/availability.hpp"
#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/kernels/cpu/reference.hpp"
#include "qpolicy/schemes/tags.hpp"

namespace qpolicy::cuda {

/// Where a launch runs and what it is for (the layer name goes into errors).
struct launch_options {
  void* stream = nullptr;  // a cudaStream_t; null: the default stream
  std::string layer;
};

template <class Scheme>
struct weight_kernel {
  static_assert(sizeof(Scheme) == 0, "no CUDA weight kernel for this scheme: only schemes whose contract row has a weight-scale layout have kernels");
};
template <>
struct weight_kernel<fp8_per_tensor> {
  /// q: [rows, cols]; scale: [1] (device). `amax_scratch`: one device uint32 the kernel may overwrite.
  static void run(const input_view& w, std::uint8_t* q, float* scale, std::uint32_t* amax_scratch,
                  const launch_options& = {});
};
template <>
struct weight_kernel<fp8_per_channel> {
  static void run(const input_view& w, std::uint8_t* q, float* scales, const launch_options& = {});
};
template <>
struct weight_kernel<fp8_per_block> {
  static void run(const input_view& w, const fp8::block_options& o, std::uint8_t* q, float* scales,
                  const launch_options& = {});
};

template <class Key>
struct activation_kernel {
  static_assert(sizeof(Key) == 0, "no CUDA activation kernel for this key: only the keys of the contract's activation table have one");
};
template <>
struct activation_kernel<fp8_per_token> {
  static void run(const input_view& x, std::uint8_t* q, float* scales, const launch_options& = {});
};
template <>
struct activation_kernel<fp8_per_tensor_dynamic> {
  static void run(const input_view& x, std::uint8_t* q, float* scale, std::uint32_t* amax_scratch,
                  const launch_options& = {});
};
template <>
struct activation_kernel<fp8_per_block_dynamic> {
  static void run(const input_view& x, const fp8::group_options& o, std::uint8_t* q, float* scales,
                  const launch_options& = {});
};

/// Per-tensor dynamic quantization of each row segment of x on its own (a MoE layer's experts):
/// segment s is rows [offsets[s], offsets[s + 1]) (device array of segments + 1), and gets the codes
/// and scale scales[s] that activation_kernel<fp8_per_tensor_dynamic> gives it alone. An empty
/// segment's scale is left unspecified. `amax_scratch`: `segments` device uint32 the kernels overwrite.
void quantize_segments_per_tensor(const input_view& x, const std::int64_t* offsets, std::int64_t segments,
                                  std::uint8_t* q, float* scales, std::uint32_t* amax_scratch, const launch_options& = {});

/// Quantizes x with formula tag Formula on the device into the parts its row of schemes::formula_table
/// has: x and every pointer of `out` are device memory (byte block scales zero-filled by the caller when
/// `opt.swizzled`). `amax_scratch`: one device uint32 the per-tensor kernels overwrite. Runs on the
/// launch's stream without waiting for it. Checks like cpu::quantize, plus: a given amax is refused
/// for the FP8 formulas (a CPU option of fp8_per_tensor_static). Instantiated for every formula.
template <class Formula>
void quantize(const input_view& x, const quantized_outputs& out, const quantize_options& opt, std::uint32_t* amax_scratch,
              const launch_options& = {});

}  // namespace qpolicy::cuda
