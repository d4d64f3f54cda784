// GPU FP8 GEMM throughput on DeepGEMM's shapes (M = 4096): per-tensor and 1x128 x 128x128
// block-scaled GEMMs through qpolicy's runner, against cuBLASLt's bf16 GEMM of the same shape in the
// same run; and a Qwen3-30B-A3B MoE layer (128 experts, top-8) run by the grouped kernel and by the
// per-expert loop of GEMMs, against each other and the bf16 GEMM of the same FLOPs. Prints a line per figure; says why and exits 0 when there
// is no device.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../support/moe_routing.hpp"
#include "../support/random_operands.hpp"
#include "qpolicy/kernels/cuda/forward.hpp"
#include "qpolicy/kernels/cuda/gemm.hpp"
#include "qpolicy/kernels/cuda/device_info.hpp"
#include "../gpu/device_buffer.hpp"
#include "best_gpu_time.hpp"

namespace fp8 = qpolicy::fp8;
namespace cuda = qpolicy::cuda;
using qpolicy::bench::best_gpu_seconds;
using qpolicy::test::device_buffer;

namespace {
/// cuBLASLt called directly for out = A W^T on FP8 codes with the given scale modes: what qpolicy's runner
/// must match (it adds checks, a cached heuristic and descriptor updates around the same call).
struct direct_cublaslt {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulAlgo_t algo{};
  void* workspace = nullptr;
  bool ok = false;
  direct_cublaslt(std::int64_t m, std::int64_t n, std::int64_t k, std::int32_t w_mode, std::int32_t a_mode, const float* w_scale,
                  const float* a_scale) {
    cublasLtCreate(&handle);
    cudaMalloc(&workspace, 32u << 20);
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &w_mode, sizeof w_mode);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &a_mode, sizeof a_mode);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof w_scale);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale, sizeof a_scale);
    cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, n, k);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, m, k);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, m, n);
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulPreferenceCreate(&pref);
    const std::size_t ws = 32u << 20;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    ok = cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, ld, ld, pref, 1, &r, &found) == CUBLAS_STATUS_SUCCESS && found > 0;
    algo = r.algo;
    cublasLtMatmulPreferenceDestroy(pref);
  }
  void run(const void* w, const void* a, void* out) {
    const float alpha = 1.0f, beta = 0.0f;
    cublasLtMatmul(handle, desc, &alpha, w, la, a, lb, &beta, out, ld, out, ld, &algo, workspace, 32u << 20, nullptr);
  }
  ~direct_cublaslt() {
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(desc);
    cudaFree(workspace);
    cublasLtDestroy(handle);
  }
};

}  // namespace

int main() {
  const auto report = cuda::query_devices();
  if (report.count == 0) {
    std::printf("cuda gemm bench: skipped: %s\n", report.description.c_str());
    return 0;
  }
  std::printf("# %s, M=4096, DeepGEMM's (N, K)\n", report.description.c_str());
  const std::int64_t m = 4096;
  const std::int64_t shapes[][2] = {{2112, 7168}, {24576, 1536}, {32768, 512}, {7168, 16384}, {4096, 7168}, {7168, 2048}};
  cuda::gemm_runner runner;
  std::mt19937 rng(1);
  for (const auto& s : shapes) {
    const std::int64_t n = s[0], k = s[1];
    std::vector<std::uint8_t> codes(static_cast<std::size_t>((m > n ? m : n) * k));
    for (auto& c : codes) c = static_cast<std::uint8_t>(rng() % 0x7E);
    std::vector<std::uint16_t> halves(codes.size());
    for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = fp8::to_bf16(fp8::decode(codes[i]));
    device_buffer<std::uint8_t> a(codes), w(codes);
    device_buffer<std::uint16_t> ah(halves), wh(halves), out(static_cast<std::size_t>(m * n));
    const std::int64_t stride = fp8::cublaslt_block_scale_stride(k);
    device_buffer<float> sa(std::vector<float>(static_cast<std::size_t>(m * (k / 128)), 0.01f));
    device_buffer<float> sw(std::vector<float>(static_cast<std::size_t>(((n + 127) / 128) * stride), 0.01f));
    const double flops = 2.0 * double(m) * double(n) * double(k);
    const double t_bf16 = best_gpu_seconds(10, [&] { runner.run_bf16(ah.ptr, wh.ptr, out.ptr, m, n, k); });
    cuda::gemm_backend used_tensor{}, used_block{};
    const double t_tensor = best_gpu_seconds(10, [&] {
      used_tensor = runner.run({m, n, k, fp8::activation_quant::per_tensor, fp8::weight_scales::per_tensor, false},
                               {a.ptr, sa.ptr, w.ptr, sw.ptr, 0, nullptr, out.ptr});
    });
    const double t_block = best_gpu_seconds(10, [&] {
      used_block = runner.run({m, n, k, fp8::activation_quant::group_128, fp8::weight_scales::block_128x128, false},
                              {a.ptr, sa.ptr, w.ptr, sw.ptr, stride, nullptr, out.ptr});
    });
    direct_cublaslt direct_tensor(m, n, k, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, sw.ptr, sa.ptr);
    direct_cublaslt direct_block(m, n, k, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, sw.ptr,
                                 sa.ptr);
    const double t_direct_tensor =
        direct_tensor.ok ? best_gpu_seconds(10, [&] { direct_tensor.run(w.ptr, a.ptr, out.ptr); }) : 0.0;
    const double t_direct_block = direct_block.ok ? best_gpu_seconds(10, [&] { direct_block.run(w.ptr, a.ptr, out.ptr); }) : 0.0;
    const auto tf = [&](double t) { return flops / t / 1e12; };
    const auto via = [](cuda::gemm_backend b) { return b == cuda::gemm_backend::cublaslt ? "cublaslt" : "fallback"; };
    const auto shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    std::printf("bench: gpu_gemm_bf16_cublaslt_%s %.1f TFLOPS\n", shape.c_str(), tf(t_bf16));
    std::printf("bench: gpu_gemm_fp8_per_tensor_%s_%s %.1f TFLOPS vs cublaslt_bf16 %.2fx\n", via(used_tensor), shape.c_str(),
                tf(t_tensor), t_bf16 / t_tensor);
    if (t_direct_tensor > 0)
      std::printf("bench: gpu_gemm_fp8_per_tensor_%s_overhead %.1f TFLOPS vs cublaslt_fp8_direct %.2fx\n", shape.c_str(), tf(t_tensor),
                  t_direct_tensor / t_tensor);
    std::printf("bench: gpu_gemm_fp8_block_%s_%s %.1f TFLOPS vs cublaslt_bf16 %.2fx\n", via(used_block), shape.c_str(), tf(t_block),
                t_bf16 / t_block);
    if (t_direct_block > 0)
      std::printf("bench: gpu_gemm_fp8_block_%s_overhead %.1f TFLOPS vs cublaslt_fp8_direct %.2fx\n", shape.c_str(), tf(t_block),
                  t_direct_block / t_block);
  }
  // MoE: 4096 tokens, E=128, H=2048, I=768, top-8 (Qwen3-30B-A3B's layer): the grouped kernel against the
  // per-expert loop, for both schemes, and against cuBLASLt bf16 of the same FLOPs.
  {
    const std::int64_t tokens = 4096, experts = 128, hidden = 2048, inter = 768, top_k = 8;
    const auto w13 = qpolicy::test::random_bf16(static_cast<std::size_t>(experts * 2 * inter * hidden), 0.03f, rng);
    const auto w2 = qpolicy::test::random_bf16(static_cast<std::size_t>(experts * hidden * inter), 0.03f, rng);
    const auto x = qpolicy::test::random_bf16(static_cast<std::size_t>(tokens * hidden), 0.9f, rng);
    const qpolicy::test::strided_routing routed(tokens, top_k, experts, 7, 16);
    const qpolicy::cpu::routing route = routed.view();
    const double flops = 2.0 * double(tokens * top_k) * 3.0 * double(hidden) * double(inter);
    const std::int64_t rows = tokens * top_k;
    device_buffer<std::uint16_t> ah(static_cast<std::size_t>(rows * hidden)), wh(static_cast<std::size_t>(3 * inter * hidden)),
        oh(static_cast<std::size_t>(rows * 3 * inter));
    const double t_dense = best_gpu_seconds(5, [&] { runner.run_bf16(ah.ptr, wh.ptr, oh.ptr, rows, 3 * inter, hidden); });
    device_buffer<std::uint16_t> dx(x), dout(x.size());
    cuda::forward_context ctx;
    auto time_layer = [&](const auto& layer, const char* scheme) {
      const auto dev = cuda::upload(layer);
      ctx.moe = cuda::moe_kernel::loop;
      const double t_loop = best_gpu_seconds(5, [&] { cuda::moe_forward(ctx, dev, dx.ptr, tokens, route, dout.ptr); });
      ctx.moe = cuda::moe_kernel::grouped;
      cuda::moe_kernel ran{};
      const double t_grouped = best_gpu_seconds(5, [&] { ran = cuda::moe_forward(ctx, dev, dx.ptr, tokens, route, dout.ptr); });
      std::printf("bench: gpu_moe_%s_loop_128x2048x768_top8_4096tok %.1f TFLOPS vs dense_bf16_same_flops %.2fx\n", scheme,
                  flops / t_loop / 1e12, t_dense / t_loop);
      if (ran != cuda::moe_kernel::grouped) {
        std::printf("# grouped kernel not run: %s\n", ctx.moe_loop_reason.c_str());
        return;
      }
      std::printf("bench: gpu_moe_%s_grouped_128x2048x768_top8_4096tok %.1f TFLOPS vs loop %.2fx\n", scheme, flops / t_grouped / 1e12,
                  t_loop / t_grouped);
      std::printf("bench: gpu_moe_%s_grouped_vs_dense_bf16 %.1f TFLOPS vs dense_bf16_same_flops %.2fx\n", scheme,
                  flops / t_grouped / 1e12, t_dense / t_grouped);
    };
    const qpolicy::input_view w13v{w13.data(), qpolicy::element::bf16, experts * 2 * inter, hidden};
    const qpolicy::input_view w2v{w2.data(), qpolicy::element::bf16, experts * hidden, inter};
    time_layer(qpolicy::cpu::quantize_moe<qpolicy::fp8_per_block>(w13v, w2v, experts), "fp8_block");
    time_layer(qpolicy::cpu::quantize_moe<qpolicy::fp8_per_tensor>(w13v, w2v, experts), "fp8_per_tensor");
  }
  return 0;
}
