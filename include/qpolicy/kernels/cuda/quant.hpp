#pragma once
// CUDA quantization kernels, one specialization per scheme tag, mirroring the CPU fast path
// (kernels/cpu/vectorized.hpp): same formulas through the shared __host__ __device__ arithmetic, so codes
// and scales are bit-identical to the CPU reference. Pointers are device pointers; every CUDA error
// becomes a qpolicy::cuda::cuda_error naming the call and the layer. Plain header: no CUDA types, so
// host code without nvcc can include it (the functions then report that CUDA is not built in).
#include <array>
#include <cstdint>
#include <utility>
#include <stdexcept>
#include <string>

#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/kernels/cpu/reference.hpp"
#include "qpolicy/schemes/tags.hpp"

namespace qpolicy::cuda {

/// A failed CUDA call: what was called, for which layer, and CUDA's message.
class cuda_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

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
  static void run(const input_view& w, const cpu::reference::block_options& o, std::uint8_t* q, float* scales,
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
  static void run(const input_view& x, const cpu::reference::group_options& o, std::uint8_t* q, float* scales,
                  const launch_options& = {});
};

/// Per-tensor dynamic quantization of each row segment of x on its own (a MoE layer's experts):
/// segment s is rows [offsets[s], offsets[s + 1]) (device array of segments + 1), and gets the codes
/// and scale scales[s] that activation_kernel<fp8_per_tensor_dynamic> gives it alone. An empty
/// segment's scale is left unspecified. `amax_scratch`: `segments` device uint32 the kernels overwrite.
void quantize_segments_per_tensor(const input_view& x, const std::int64_t* offsets, std::int64_t segments,
                                  std::uint8_t* q, float* scales, std::uint32_t* amax_scratch, const launch_options& = {});

/// Copies a host tensor to the device, runs the kernel of quant key tag `Key` there and copies the
/// codes and `scale_count` scales back. Instantiated for every key of the key table; a key without a
/// tensor kernel (schemes::has_tensor_kernel) throws std::invalid_argument.
template <class Key>
void quantize_host_tensor(const input_view& host, const cpu::reference::block_options& blocks,
                          const cpu::reference::group_options& groups, std::uint8_t* q, float* scales,
                          std::size_t scale_count, const launch_options& = {});

/// The kernel of quant key tag `Key` on device memory: x, q ([rows, cols] codes) and scales (the key's
/// scale grid) are device pointers; runs on the default stream and waits for it. Instantiated and
/// refused like quantize_host_tensor.
template <class Key>
void quantize_device_tensor(const input_view& x, const cpu::reference::block_options& blocks,
                            const cpu::reference::group_options& groups, std::uint8_t* q, float* scales,
                            const launch_options& = {});

namespace detail {
/// quantize_host_tensor and quantize_device_tensor of every key of the key table: the backends define
/// an array of these, which instantiates the templates for every key without a list of keys to keep up
/// to date.
template <std::size_t... I>
constexpr auto every_key_entry(std::index_sequence<I...>) {
  return std::array{std::pair{&quantize_host_tensor<key_tag<static_cast<key_id>(I)>>,
                              &quantize_device_tensor<key_tag<static_cast<key_id>(I)>>}...};
}
}  // namespace detail

}  // namespace qpolicy::cuda
