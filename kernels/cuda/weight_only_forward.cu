// The device side of the low-precision forward passes: uploads, and the activation treatments
// (the CUDA quantizers, then the codes decoded to the bf16 operands of the weight-only GEMM).
#include <cuda_runtime.h>

#include "qpolicy/kernels/cuda/detail/cuda_check.hpp"
#include "qpolicy/kernels/cuda/block_quantizer.hpp"
#include "qpolicy/kernels/cuda/weight_only_forward.hpp"

namespace qpolicy::cuda {

namespace {

using detail::check;
using detail::stream_of;

/// values[i] = the operand of element i: MXFP4 EVEN codes decoded and rounded to bf16 (exact), or
/// NVFP4 codes times their e4m3 block scale (exact in bf16; 0 for a zero code, whose block scale may
/// be NaN in an all-zero token).
template <bool Mxfp4>
__global__ void decode_operands(const std::uint8_t* codes, const std::uint8_t* scales, std::int64_t n, std::uint16_t* values) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint8_t byte = codes[i / 2];
    const std::uint8_t c = i % 2 ? lp::e2m1_high(byte) : lp::e2m1_low(byte);
    float v;
    if constexpr (Mxfp4) v = lp::e2m1_value(c) * lp::e8m0_value(scales[i / 32]);
    else v = (c & 7u) == 0 ? 0.0f : lp::e2m1_value(c) * fp8::decode(scales[i / 16]);
    values[i] = fp8::to_bf16(v);
  }
}

/// values[i] = MXFP8 torch-path codes dequantized in float32 (q * 2^(b - 127)) and rounded to bf16 (§B.5).
__global__ void decode_mxfp8(const std::uint8_t* codes, const std::uint8_t* scales, std::int64_t n, std::uint16_t* values) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    values[i] = fp8::to_bf16(fp8::decode(codes[i]) * lp::e8m0_value(scales[i / 32]));
}

/// out[i] = element i of x's rows rotated by the normalized Hadamard matrix of `size`, rounded to bf16
/// (§A.3: the fused multiply-add chain of numerics/detail/hadamard.hpp).
__global__ void rotate_bf16(const std::uint16_t* x, std::int64_t n, std::int64_t k, std::int64_t size, std::uint16_t* out) {
  const float c = lp::hadamard_magnitude(size);
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t column = i % k, start = i - column + column / size * size;
    out[i] = fp8::to_bf16(lp::rotated_f32([&](std::int64_t j) { return fp8::from_bf16(x[start + j]); }, size, column % size, c));
  }
}

}  // namespace

namespace detail {

device_quantized_matrices upload_matrices(const std::vector<cpu::quantized_matrix>& matrices) {
  device_quantized_matrices d;
  if (matrices.empty()) return d;
  d.rows = matrices.front().rows;
  d.cols = matrices.front().cols;
  d.code_step = static_cast<std::int64_t>(matrices.front().codes.size());
  d.scale_step = static_cast<std::int64_t>(matrices.front().block_scales.size());
  d.codebook_step = static_cast<std::int64_t>(matrices.front().codebook.size());
  std::vector<std::uint8_t> codes, scales, books;
  std::vector<float> rows, tensors;
  for (const auto& m : matrices) {
    codes.insert(codes.end(), m.codes.begin(), m.codes.end());
    scales.insert(scales.end(), m.block_scales.begin(), m.block_scales.end());
    books.insert(books.end(), m.codebook.begin(), m.codebook.end());
    rows.insert(rows.end(), m.row_scales.begin(), m.row_scales.end());
    tensors.push_back(m.tensor_scale);
  }
  d.codes = to_device(codes.data(), codes.size());
  if (!scales.empty()) d.block_scales = to_device(scales.data(), scales.size());
  if (!books.empty()) d.codebooks = to_device(books.data(), books.size());
  d.row_scales = to_device(rows.data(), rows.size() * sizeof(float));
  d.tensor_scales = to_device(tensors.data(), tensors.size() * sizeof(float));
  return d;
}

device_treated treat_activations(forward_context& ctx, schemes::activation_treatment t, const std::uint16_t* x, std::int64_t rows,
                                 std::int64_t k, std::int64_t hadamard_size) {
  if (t == schemes::activation_treatment::none || rows == 0) return {x, nullptr};
  const std::int64_t n = rows * k;
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
  if (schemes::rotates(t)) {
    // §A.3: the rotated activations (bf16), then the row's treatment (Marlin: none) or MXFP4 EVEN qdq.
    ctx.rotated.reserve(static_cast<std::size_t>(n) * sizeof(std::uint16_t));
    auto* rotated = ctx.rotated.as<std::uint16_t>();
    rotate_bf16<<<blocks, 256, 0, stream_of(ctx.launch)>>>(x, n, k, hadamard_size ? hadamard_size : 32, rotated);
    check(cudaGetLastError(), "rotate_bf16 (Hadamard)", ctx.launch);
    if (t == schemes::activation_treatment::rotated) return {rotated, nullptr};
    return treat_activations(ctx, schemes::activation_treatment::mxfp4_qdq, rotated, rows, k);
  }
  const input_view xv{x, element::bf16, rows, k};
  // Every quantize-dequantize treatment's scratch: codes (a byte each for MXFP8, packed for the 4-bit
  // formats), block scales (one per 16 elements at most), the bf16 operands.
  ctx.codes.reserve(static_cast<std::size_t>(n));
  ctx.scales.reserve(static_cast<std::size_t>(n / 16));
  ctx.treated.reserve(static_cast<std::size_t>(n) * sizeof(std::uint16_t));
  ctx.amax.reserve(sizeof(std::uint32_t));
  auto* codes = ctx.codes.as<std::uint8_t>();
  auto* scales = ctx.scales.as<std::uint8_t>();
  auto* values = ctx.treated.as<std::uint16_t>();
  if (t == schemes::activation_treatment::mxfp8_qdq) {
    block_quantizer<formulas::mxfp8_torch>::run(xv, {codes, scales}, ctx.amax.as<std::uint32_t>(), {}, ctx.launch);
    decode_mxfp8<<<blocks, 256, 0, stream_of(ctx.launch)>>>(codes, scales, n, values);
    check(cudaGetLastError(), "decode_mxfp8 (LUT-B activations)", ctx.launch);
    return {values, nullptr};
  }
  if (t == schemes::activation_treatment::mxfp4_qdq) {
    block_quantizer<formulas::mxfp4_even>::run(xv, {codes, scales}, ctx.amax.as<std::uint32_t>(), {}, ctx.launch);
    decode_operands<true><<<blocks, 256, 0, stream_of(ctx.launch)>>>(codes, scales, n, values);
    check(cudaGetLastError(), "decode_operands (MXFP4)", ctx.launch);
    return {values, nullptr};
  }
  ctx.token_scales.reserve(static_cast<std::size_t>(rows) * sizeof(float));
  auto* st = ctx.token_scales.as<float>();
  block_quantizer<formulas::nvfp4_per_token>::run(xv, {codes, scales, st}, ctx.amax.as<std::uint32_t>(), {}, ctx.launch);
  decode_operands<false><<<blocks, 256, 0, stream_of(ctx.launch)>>>(codes, scales, n, values);
  check(cudaGetLastError(), "decode_operands (NVFP4)", ctx.launch);
  return {values, st};
}

}  // namespace detail

}  // namespace qpolicy::cuda
