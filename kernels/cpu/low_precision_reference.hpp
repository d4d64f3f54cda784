#pragma once
// The CPU reference of the low-precision quantizers (low-precision-numerics.md), written to be read
// against the spec: plain loops over the shared format arithmetic (numerics/low_precision.hpp). The
// vectorized and CUDA kernels of issue 13 are tested bit for bit against these.
#include <cstdint>

#include "qpolicy/numerics/tensor_view.hpp"

namespace qpolicy::cpu::reference {

/// §3.2, MXFP8 weights, the torch path (what runs on Hopper and in vLLM's CPU code): per row and
/// 32-block, b = CEIL(max(amaxT, tiny) / 448) and q = tcvt(x / E8(b)); a block holding NaN gives NaN
/// codes and byte 0. cols must be a multiple of 32 (checked by the caller). q: [rows, cols] e4m3fn;
/// scales: [rows, cols / 32] E8M0 bytes.
void mxfp8_torch(const fp8::input_view& x, std::uint8_t* q, std::uint8_t* scales);

/// §3.3, MXFP8 on Blackwell (FlashInfer's cute-dsl kernel, weights and activations): b =
/// UE8M0-RP(amaxN * (1/448)), inv = 2^(127 - b) (0 for b = 0 and b = 254), q = sat(x * inv).
void mxfp8_flashinfer(const fp8::input_view& x, std::uint8_t* q, std::uint8_t* scales);

/// §4.2, MXFP4 weights (and MoE emulation activations, before their dequantization): per row and
/// 32-block, b = EVEN(amax) and c = e2m1(x * 2^(127 - b)), packed two codes a byte (element 2j in the
/// low nibble). NaN in a block is unspecified by vLLM (§11); here NaN is ignored in the amax.
/// q: [rows, cols / 2]; scales: [rows, cols / 32].
void mxfp4_even(const fp8::input_view& x, std::uint8_t* q, std::uint8_t* scales);

/// §4.3, MXFP4 activations of Blackwell linear layers (FlashInfer, RCEIL): b = UE8M0-RP(amaxN * (1/6)),
/// inv as in §3.3, c = e2m1(x * inv). Outputs as mxfp4_even.
void mxfp4_flashinfer(const fp8::input_view& x, std::uint8_t* q, std::uint8_t* scales);

}  // namespace qpolicy::cpu::reference
