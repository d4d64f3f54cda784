#pragma once
// The CPU reference of the low-precision quantizers (low-precision-numerics.md), written to be read
// against the spec: plain loops over the shared format arithmetic (numerics/block_formats.hpp). The
// vectorized and CUDA kernels are tested bit for bit against these.
#include <cstdint>

#include "qpolicy/numerics/tensor_view.hpp"

namespace qpolicy::cpu::reference {

/// §3.2, MXFP8 weights, the torch path (what runs on Hopper and in vLLM's CPU code): per row and
/// 32-block, b = CEIL(max(amaxT, tiny) / 448) and q = tcvt(x / E8(b)); a block holding NaN gives NaN
/// codes and byte 0. cols must be a multiple of 32 (checked by the caller). q: [rows, cols] e4m3fn;
/// scales: [rows, cols / 32] E8M0 bytes.
void mxfp8_torch(const input_view& x, std::uint8_t* q, std::uint8_t* scales);

/// §3.3, MXFP8 on Blackwell (FlashInfer's cute-dsl kernel, weights and activations): b =
/// UE8M0-RP(amaxN * (1/448)), inv = 2^(127 - b) (0 for b = 0 and b = 254), q = sat(x * inv).
void mxfp8_flashinfer(const input_view& x, std::uint8_t* q, std::uint8_t* scales);

/// §4.2, MXFP4 weights (and MoE emulation activations, before their dequantization): per row and
/// 32-block, b = EVEN(amax) and c = e2m1(x * 2^(127 - b)), packed two codes a byte (element 2j in the
/// low nibble). NaN in a block is unspecified by vLLM (§11); here NaN is ignored in the amax.
/// q: [rows, cols / 2]; scales: [rows, cols / 32].
void mxfp4_even(const input_view& x, std::uint8_t* q, std::uint8_t* scales);

/// §4.3, MXFP4 activations of Blackwell linear layers (FlashInfer, RCEIL): b = UE8M0-RP(amaxN * (1/6)),
/// inv as in §3.3, c = e2m1(x * inv). Outputs as mxfp4_even.
void mxfp4_flashinfer(const input_view& x, std::uint8_t* q, std::uint8_t* scales);

/// §5.2, INT8 per-channel weights (weight-only MoE), all arithmetic in the input's dtype D: per row,
/// s = rD(amaxT / 127), t = rD(w / s), q = clamp(round half even(t), -127, 127), NaN -> 0. q: [rows,
/// cols] int8; scales: [rows] (the D value s, widened exactly).
void int8_per_channel(const input_view& w, std::int8_t* q, float* scales);

/// §6.2, NVFP4 weights of one expert matrix: global scale gs = rcp(max(amaxT, 1e-8)) * 2688, per
/// 16-block e4m3 scale sf = sat(gs * (amaxN * rcp(6))), codes e2m1(x * rcp(F8(sf) * rcp(gs))) (0 when
/// sf is 0). rcp.approx is modelled as the correctly rounded reciprocal (§11). q: [rows, cols / 2];
/// sf: [rows, cols / 16]; returns weight_scale_2 = rcp(gs) and the global scale. `given_amax`: amaxT
/// from there instead (a w13 whose gate and up share one global scale).
struct nvfp4_global {
  float weight_scale_2 = 0, global_scale = 0;
};
nvfp4_global nvfp4_weight(const input_view& w, std::uint8_t* q, std::uint8_t* sf, const float* given_amax = nullptr);

/// §6.3, NVFP4 per-token activations (FlashInfer's fast-math kernel): per row, st = amaxN * (1/2688)
/// and E = rcp(st); per 16-block, sf = sat(E * (amaxN * rcp(6))) and codes e2m1(x * rcp(F8(sf) * rcp(E)))
/// (0 for an all-zero block). q: [rows, cols / 2]; sf: [rows, cols / 16]; per_token: [rows] (st).
void nvfp4_per_token(const input_view& x, std::uint8_t* q, std::uint8_t* sf, float* per_token);

/// new-schemes §A.2-A.3: each `size`-column block of each row times the normalized Sylvester matrix, one
/// fused multiply-add per term in order, rounded once to x's dtype; out: [rows, cols] (float32 holding
/// the rounded values).
void hadamard_rotate(const input_view& x, std::int64_t size, float* out);

/// new-schemes §B.3, LUT-B: per 8x64 tile (tiles [rows / 8, cols / 64], row-major), the CEIL scale of
/// amax / 448, the values normalized by it and the Lloyd-fitted codebook. packed: 192 bytes a tile;
/// codebooks: 8 e4m3 bytes a tile, ascending; scales: 1 E8M0 byte a tile.
void lut_b(const input_view& w, std::uint8_t* packed, std::uint8_t* codebooks, std::uint8_t* scales);

/// new-schemes §B.4: the [rows, cols] float32 values of LUT-B tiles, F8(codebook[index]) * 2^(scale - 127).
void lut_b_dequantize(const std::uint8_t* packed, const std::uint8_t* codebooks, const std::uint8_t* scales, std::int64_t rows,
                      std::int64_t cols, float* out);

}  // namespace qpolicy::cpu::reference
