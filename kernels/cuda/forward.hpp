#pragma once
// Forward passes on the GPU, the same steps as kernels/cpu/forward.hpp: a linear layer quantizes its
// activations with the CUDA quantization kernels and runs its FP8 GEMM through the gemm_runner
// (cuBLASLt, or the bit-exact fallback); a MoE layer gathers tokens per expert and runs w13,
// SiLU-and-mul and w2 for all experts with one grouped GEMM launch each (grouped_gemm.hpp), or per
// expert through the gemm_runner (the loop, the baseline the grouped kernel is measured against), then
// sums each token's experts with its routing weights. Layers are uploaded from their
// CPU-quantized form (the codes and scales are bit-identical on both backends). Plain header.
#include <cstdint>
#include <memory>
#include <string>

#include "../cpu/forward.hpp"
#include "gemm.hpp"

namespace qpolicy::cuda {

/// Device memory, freed with the owner.
class device_memory {
 public:
  device_memory() = default;
  explicit device_memory(std::size_t bytes);
  device_memory(device_memory&&) noexcept;
  device_memory& operator=(device_memory&&) noexcept;
  ~device_memory();
  void* get() const { return ptr_; }
  std::size_t size() const { return bytes_; }
  /// Grows to at least `bytes` (contents are not kept).
  void reserve(std::size_t bytes);
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A copy of `bytes` host bytes in new device memory.
device_memory to_device(const void* host, std::size_t bytes);
/// Copies `bytes` from device memory to the host.
void to_host(const device_memory& from, void* host, std::size_t bytes);
/// Waits for the device's work so far.
void synchronize();

/// How a MoE layer runs its expert GEMMs: all experts in one grouped launch, or one GEMM per expert.
enum class moe_kernel : std::uint8_t { grouped, loop };

/// What forward passes reuse between calls: the GEMM runner and scratch buffers.
struct forward_context {
  gemm_runner runner;
  device_memory codes, scales, amax, h13, act, y2, gathered, routing;
  launch_options launch;
  gemm_backend prefer = gemm_backend::cublaslt;  // fallback: the kernel that equals the CPU reference
  /// grouped runs when the device and shapes allow it and `prefer` is cublaslt (the grouped kernel sums
  /// in its own order; the bit-exact fallback runs per expert).
  moe_kernel moe = moe_kernel::grouped;
  std::string moe_loop_reason;  // why the last MoE pass ran the loop (empty when it ran grouped)
};

/// A linear layer on the device.
struct device_linear {
  fp8::weight_scales weights{};
  fp8::activation_quant activation{};
  std::int64_t out_features = 0, in_features = 0, w_scale_stride = 0;
  device_memory codes, scales, bias;  // bias: bf16 [out], or empty
};
device_linear upload(const cpu::fp8_linear& layer);

/// out[rows, out_features] = the layer applied to x[rows, in_features] (both bf16, device). Returns
/// the GEMM backend that ran.
gemm_backend linear_forward(forward_context& ctx, const device_linear& layer, const std::uint16_t* x, std::int64_t rows,
                            std::uint16_t* out);

/// A MoE layer on the device (layout as cpu::fp8_moe).
struct device_moe {
  fp8::weight_scales weights{};
  fp8::activation_quant activation{};
  std::int64_t experts = 0, hidden = 0, intermediate = 0, hidden_padded = 0, intermediate_padded = 0;
  device_memory w13, w2, s13, s2;
  std::int64_t s13_step = 0, s2_step = 0, s13_stride = 0, s2_stride = 0;  // scales per expert; block row strides
};
device_moe upload(const cpu::fp8_moe& layer);

/// out[T, H] (bf16, device) for x[T, H] (bf16, device) routed by `route` (host arrays). Returns
/// which kernel ran the expert GEMMs. Throws std::invalid_argument for an expert id out of range, as
/// the CPU pass does.
moe_kernel moe_forward(forward_context& ctx, const device_moe& layer, const std::uint16_t* x, std::int64_t tokens,
                 const cpu::routing& route, std::uint16_t* out);

}  // namespace qpolicy::cuda
