// The problem checks of the CUDA GEMMs: host code, built with or without nvcc.
#include <string>

#include "qpolicy/kernels/cuda/gemm.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy::cuda {

namespace {
bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }
std::string num(std::int64_t v) { return std::to_string(v); }
}  // namespace

std::string gemm_check(const gemm_problem& p, const gemm_operands& o) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0)
    return "GEMM sizes must be positive, got M=" + num(p.m) + " N=" + num(p.n) + " K=" + num(p.k);
  if (!o.a || !o.a_scale || !o.w || !o.w_scale || !o.out) return "GEMM operands A, its scales, W, its scales and out are required";
  if (p.bias && !o.bias) return "the problem has a bias but no bias pointer was given";
  if (auto why = schemes::pairing_sentence(p.weights, p.activation, p.k); !why.empty()) return why;
  const bool blocks = p.weights == fp8::weight_scales::block_128x128;
  if (blocks) {
    if (o.w_scale_stride < p.k / 128)
      return "the weight block scales need at least K/128 = " + num(p.k / 128) + " scales per block row, got a stride of " +
             num(o.w_scale_stride);
  }
  return {};
}

std::string cublaslt_can_implement(const gemm_problem& p, const gemm_operands& o, int sm) {
  if (auto e = gemm_check(p, o); !e.empty()) return e;
  if (sm < 89) return "cuBLASLt FP8 matmuls need compute capability 8.9 or newer, this device is sm_" + num(sm);
  if (p.k % 16 != 0) return "cuBLASLt's FP8 TN layout needs K % 16 == 0 (16-byte rows), got K=" + num(p.k);
  if (p.n % 8 != 0) return "cuBLASLt needs N % 8 == 0 (16-byte rows of the bf16 output), got N=" + num(p.n);
  if (!aligned16(o.a) || !aligned16(o.w) || !aligned16(o.out) || (o.bias && !aligned16(o.bias)))
    return "cuBLASLt needs 16-byte aligned A, W, out and bias pointers";
  if (p.weights == fp8::weight_scales::block_128x128) {
    if (sm != 90) return "cuBLASLt's 128-wide block scaling (VEC128_32F / BLK128x128_32F) is a Hopper (sm_90) mode; this device is sm_" + num(sm);
    if (p.m % 4 != 0) return "cuBLASLt's 1x128 activation scales need M % 4 == 0 (16-byte scale columns), got M=" + num(p.m);
    if (o.w_scale_stride != fp8::cublaslt_block_scale_stride(p.k))
      return "cuBLASLt reads 128x128 weight scales with a row stride of " + num(fp8::cublaslt_block_scale_stride(p.k)) +
             " (K/128 rounded up to 4), got " + num(o.w_scale_stride);
    if (!aligned16(o.a_scale) || !aligned16(o.w_scale)) return "cuBLASLt needs 16-byte aligned block scales";
  }
  return {};
}

}  // namespace qpolicy::cuda
