#pragma once
// The CPU fast path: the same formulas as the reference, one specialization per scheme tag, split over
// threads by rows / blocks, inputs widened a row at a time into float buffers. Bit-identical to the
// reference (tests/numerics: property tests on random shapes); reductions only use max, which is
// exact and order-free, so splitting the work cannot change a bit.
#include <cstdint>

#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/schemes/detail/kernel_select.hpp"
#include "qpolicy/schemes/tags.hpp"
#include "qpolicy/kernels/cpu/reference.hpp"

namespace qpolicy::cpu {

/// How many threads a kernel may use (0: the hardware's count).
struct cpu_options {
  unsigned threads = 0;
};

/// Weight quantization of one scheme (primary template: the scheme has no weight kernel).
template <class Scheme>
struct weight_kernel {
  static_assert(sizeof(Scheme) == 0, "no CPU weight kernel for this scheme: only schemes whose contract row has a weight-scale layout have kernels");
};
template <>
struct weight_kernel<fp8_per_tensor> {
  /// q: [rows, cols]; scale: [1].
  static void run(const input_view& w, std::uint8_t* q, float* scale, const cpu_options& = {});
  /// With the amax given (the joint amax of a fused layer's shards or of an expert's w13).
  static void run_with_amax(const input_view& w, float amax, std::uint8_t* q, float* scale,
                            const cpu_options& = {});
  static float amax(const input_view& w, const cpu_options& = {});
};
template <>
struct weight_kernel<fp8_per_channel> {
  /// q: [rows, cols]; scales: [rows].
  static void run(const input_view& w, std::uint8_t* q, float* scales, const cpu_options& = {});
};
template <>
struct weight_kernel<fp8_per_block> {
  /// q: [rows, cols]; scales: [ceil(rows/128), ceil(cols/128)].
  static void run(const input_view& w, const reference::block_options& o, std::uint8_t* q, float* scales,
                  const cpu_options& = {});
};

/// Dynamic activation quantization of one activation key.
template <class Key>
struct activation_kernel {
  static_assert(sizeof(Key) == 0, "no CPU activation kernel for this key: only the keys of the contract's activation table have one");
};
template <>
struct activation_kernel<fp8_per_token> {
  static void run(const input_view& x, std::uint8_t* q, float* scales, const cpu_options& = {});
};
template <>
struct activation_kernel<fp8_per_tensor_dynamic> {
  static void run(const input_view& x, std::uint8_t* q, float* scale, const cpu_options& = {});
};
template <>
struct activation_kernel<fp8_per_block_dynamic> {
  static void run(const input_view& x, const reference::group_options& o, std::uint8_t* q, float* scales,
                  const cpu_options& = {});
};

/// How many elements of x are NaN or infinite (read from the bits: an all-ones exponent), one pass.
std::int64_t count_non_finite(const input_view& x);

/// The options a key's formula may take; a kernel reads the ones its formula has.
struct key_options {
  reference::block_options blocks{};
  reference::group_options groups{};
};

/// Runs the kernel of quant key tag Key (weight kernels for static keys, activation kernels for
/// dynamic ones: schemes::kernel_of_key) from family pair WeightKernel / ActivationKernel. q: the
/// codes; s: the scales in the shape schemes::scale_grid gives (groups: `o.groups.layout`).
template <class Key, template <class> class WeightKernel, template <class> class ActivationKernel, class Options>
void run_key_kernel(const input_view& x, const key_options& o, std::uint8_t* q, float* s, const Options& co) {
  static_assert(schemes::has_tensor_kernel(Key::id), "this quant key has no kernel in this build");
  using kernel = schemes::kernel_of_key<WeightKernel, ActivationKernel, Key>;
  // The kernels' signatures differ by what their formula needs: block or group options.
  if constexpr (requires { kernel::run(x, o.blocks, q, s, co); }) kernel::run(x, o.blocks, q, s, co);
  else if constexpr (requires { kernel::run(x, o.groups, q, s, co); }) kernel::run(x, o.groups, q, s, co);
  else kernel::run(x, q, s, co);
}

/// The vectorized kernel of quant key tag Key.
template <class Key>
void run_key_kernel(const input_view& x, const key_options& o, std::uint8_t* q, float* s, const cpu_options& co = {}) {
  run_key_kernel<Key, weight_kernel, activation_kernel>(x, o, q, s, co);
}

}  // namespace qpolicy::cpu
