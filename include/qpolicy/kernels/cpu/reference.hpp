#pragma once
// The CPU reference of every FP8 quantization path (spec §4-§9): plain loops over the shared
// per-element arithmetic (include/qpolicy/numerics/numerics.hpp), written to be read against the spec. The fast CPU
// path and the CUDA kernels are tested bit for bit against these.
#include <cstdint>

#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/schemes/tags.hpp"

namespace qpolicy::cpu::reference {

using fp8::block_options;
using fp8::group_options;
using fp8::scale_layout;

/// §4: one scale for the whole weight, reciprocal multiply, clampS, sat. scale: [1].
void weight_per_tensor(const input_view& w, std::uint8_t* q, float* scale);

/// §4 with a given amax (fused shards and MoE w13 share one): scale = amax / 448.
void weight_per_tensor_with_amax(const input_view& w, float amax, std::uint8_t* q, float* scale);

/// amaxT: the largest magnitude, NaN when any element is NaN.
float amax_propagating(const input_view& x);

/// §5 dynamic per-tensor: no floor, reciprocal multiply. scale: [1].
void dynamic_per_tensor(const input_view& x, std::uint8_t* q, float* scale);

/// §5 per-token: floor MIN_SF, true division. scales: [rows].
void dynamic_per_token(const input_view& x, std::uint8_t* q, float* scales);

/// §6 per-channel weight: torch max with MIN_SF (NaN propagates), true division, clampT, tcvt.
void weight_per_channel(const input_view& w, std::uint8_t* q, float* scales);

/// §7: cols must be a multiple of group_size (checked by the caller). scales: scale_storage(layout).
void per_token_group(const input_view& x, const group_options& options, std::uint8_t* q, float* scales);

/// §8: zero-padded 128x128 blocks, floor 1e-4, reciprocal multiply, tcvt, no clamp.
/// q: [rows, cols]; scales: [ceil(rows/128), ceil(cols/128)] row-major.
void block_128x128(const input_view& w, const block_options& options, std::uint8_t* q, float* scales);

/// §9 per-tensor: w13 [E, 2I, H] and w2 [E, H, I], each expert's matrix its own scale ([E] each).
void moe_per_tensor(const input_view& w13, const input_view& w2, std::int64_t experts, std::uint8_t* q13,
                    float* s13, std::uint8_t* q2, float* s2);

/// §9's padded copy of expert `e` (I and H rounded up to `multiple` as Ip, Hp: 128 for FP8 blocks, 32
/// for MXFP4, low-precision-numerics.md §4.1): pad13 [2Ip, Hp] with the gate rows at [0, I) and the up
/// rows at [Ip, Ip + I), pad2 [Hp, Ip]; every other element is written as zero.
void moe_pad_expert(const input_view& w13, const input_view& w2, std::int64_t e, std::int64_t inter, std::int64_t hidden,
                    float* pad13, float* pad2, std::int64_t multiple = 128);

/// §9 per-block: pads I and H to 128 (gate rows at [0, I), up rows at [Ip, Ip + I)), blocks each
/// padded expert matrix. q13: [E, 2Ip, Hp], s13: [E, 2Ip/128, Hp/128], q2: [E, Hp, Ip], s2: [E, Hp/128, Ip/128].
void moe_per_block(const input_view& w13, const input_view& w2, std::int64_t experts, const block_options& options,
                   std::uint8_t* q13, float* s13, std::uint8_t* q2, float* s2);

/// The reference activation quantizers as a kernel family keyed by activation key tag, in the shape of
/// the vectorized kernels (cpu::activation_kernel): what the reference forward path runs.
struct no_threads {};
template <class Key>
struct activation_kernel {
  static_assert(sizeof(Key) == 0, "no reference activation quantizer for this key");
};
template <>
struct activation_kernel<fp8_per_tensor_dynamic> {
  static void run(const input_view& x, std::uint8_t* q, float* s, no_threads) { dynamic_per_tensor(x, q, s); }
};
template <>
struct activation_kernel<fp8_per_token> {
  static void run(const input_view& x, std::uint8_t* q, float* s, no_threads) { dynamic_per_token(x, q, s); }
};
template <>
struct activation_kernel<fp8_per_block_dynamic> {
  static void run(const input_view& x, const group_options& o, std::uint8_t* q, float* s, no_threads) {
    per_token_group(x, o, q, s);
  }
};
/// The reference weight quantizers keyed by scheme tag, in the shape of cpu::weight_kernel.
template <class Scheme>
struct weight_kernel {
  static_assert(sizeof(Scheme) == 0, "no reference weight quantizer for this scheme");
};
template <>
struct weight_kernel<fp8_per_tensor> {
  static void run(const input_view& w, std::uint8_t* q, float* s, no_threads) { weight_per_tensor(w, q, s); }
};
template <>
struct weight_kernel<fp8_per_channel> {
  static void run(const input_view& w, std::uint8_t* q, float* s, no_threads) { weight_per_channel(w, q, s); }
};
template <>
struct weight_kernel<fp8_per_block> {
  static void run(const input_view& w, const block_options& o, std::uint8_t* q, float* s, no_threads) {
    block_128x128(w, o, q, s);
  }
};

/// The reference of formula tag Formula into the parts its row has (block scales scattered into the
/// 128x4 layout when `o.swizzled`): the oracle of cpu::quantize and cuda::quantize. Checks nothing,
/// like cpu::quantize. Instantiated for every formula of the registry.
template <class Formula>
void quantize(const input_view& x, const quantized_outputs& out, const quantize_options& o = {});

}  // namespace qpolicy::cpu::reference
