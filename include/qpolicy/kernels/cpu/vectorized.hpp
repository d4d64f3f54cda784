#pragma once
// The CPU fast path: the same formulas as the reference, split over threads by rows / blocks, inputs
// widened a row at a time into float buffers. quantize<Formula> runs any formula; the FP8 kernel
// families below are its FP8 half (and what the FP8 forward passes call). Bit-identical to the
// reference (tests/numerics: property tests on random shapes); reductions only use max, which is
// exact and order-free, so splitting the work cannot change a bit.
#include <cstdint>

#include "qpolicy/numerics/tensor_view.hpp"
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
  static void run(const input_view& w, const fp8::block_options& o, std::uint8_t* q, float* scales,
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
  static void run(const input_view& x, const fp8::group_options& o, std::uint8_t* q, float* scales,
                  const cpu_options& = {});
};

/// How many elements of x are NaN or infinite (read from the bits: an all-ones exponent), one pass.
std::int64_t count_non_finite(const input_view& x);

/// Quantizes x with formula tag Formula (`formulas::mxfp4_even`, ...) on the CPU's fast path, into
/// the parts its row of schemes::formula_table has. Checks nothing: the caller has checked that K is a
/// multiple of the row's k_multiple and that the input's dtype suits it (io/quantize_tensor.hpp does
/// both). Bit-identical to reference::quantize<Formula>. Instantiated for every formula of the registry.
template <class Formula>
void quantize(const input_view& x, const quantized_outputs& out, const quantize_options& o = {}, const cpu_options& co = {});

}  // namespace qpolicy::cpu
