#pragma once
// FP8 GEMMs on the GPU: out[M, N] (bf16) = dq(A)[M, K] x dq(W)[N, K]^T with the scheme's scales (spec
// §10), through cuBLASLt (TN, float32 accumulation, bf16 output, optional bf16 bias) where it can run
// the problem, else through the fallback kernel: one thread per output with the CPU reference's
// float32 operations in the same order, so its results equal the CPU reference bit for bit. Pointers
// are device pointers. Plain header: no CUDA types.
//   cuda::gemm_runner runner;                       // handle, workspace, heuristics cached per shape
//   if (auto why = cuda::cublaslt_can_implement(problem, sm); !why.empty()) { /* fallback runs */ }
//   runner.run(problem, operands, {stream, "layer name"});
#include <cstdint>
#include <memory>
#include <string>

#include "qpolicy/numerics/gemm_desc.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"

namespace qpolicy::cuda {

/// The shape and scaling of one GEMM.
struct gemm_problem {
  std::int64_t m = 0, n = 0, k = 0;
  fp8::activation_quant activation = fp8::activation_quant::per_tensor;
  fp8::weight_scales weights = fp8::weight_scales::per_tensor;
  bool bias = false;
};

/// Device pointers of one GEMM. Scales: activations [1], [M] or 1x128 groups column-major (g * M + m,
/// as activation_kernel<fp8_per_block_dynamic> writes with scale_layout::column_major); weights [1],
/// [N] or the 128x128 grid with `w_scale_stride` scales per block row (cuBLASLt needs
/// fp8::cublaslt_block_scale_stride(K)).
struct gemm_operands {
  const std::uint8_t* a = nullptr;
  const float* a_scale = nullptr;
  const std::uint8_t* w = nullptr;
  const float* w_scale = nullptr;
  std::int64_t w_scale_stride = 0;
  const std::uint16_t* bias = nullptr;  // bf16 [N], when problem.bias
  std::uint16_t* out = nullptr;         // bf16 [M, N]
};

/// Which implementation ran a GEMM.
enum class gemm_backend : std::uint8_t { cublaslt, fallback };

/// Empty when the problem is well-formed, else what is wrong with it (checked before any launch).
std::string gemm_check(const gemm_problem& p, const gemm_operands& o);

/// Empty when cuBLASLt's FP8 matmul can take the problem on a device of compute capability `sm`
/// (e.g. 90), else the constraint it breaks: FP8 needs sm >= 89 and 128-wide blocks sm 90; the TN
/// layout needs K % 16 == 0 and N % 8 == 0 (16-byte rows of A, W and the bf16 output); pointers 16-byte
/// aligned; 1x128 groups need 128x128 weight blocks, K % 128 == 0, M % 4 == 0 and the padded block
/// stride. cuBLASLt may still refuse a problem that passes (no heuristic result): `run` then falls back.
std::string cublaslt_can_implement(const gemm_problem& p, const gemm_operands& o, int sm);

/// Runs GEMMs: one cuBLASLt handle and workspace, heuristic results cached per (shape, scaling).
/// Not thread-safe; one per thread or stream.
class gemm_runner {
 public:
  gemm_runner();
  ~gemm_runner();
  gemm_runner(const gemm_runner&) = delete;
  gemm_runner& operator=(const gemm_runner&) = delete;

  /// Runs `p`; cuBLASLt when `prefer` is cublaslt and it can, else the fallback kernel. Returns which
  /// ran. Throws std::invalid_argument for a malformed problem, cuda_error for a failed call.
  gemm_backend run(const gemm_problem& p, const gemm_operands& o, const launch_options& launch = {},
                   gemm_backend prefer = gemm_backend::cublaslt);
  /// Why the last run fell back to the kernel (empty when cuBLASLt ran it).
  const std::string& last_fallback_reason() const;

  /// cuBLASLt's bf16 GEMM, out = A W^T with bf16 in and out: the baseline of the benchmarks.
  void run_bf16(const std::uint16_t* a, const std::uint16_t* w, std::uint16_t* out, std::int64_t m, std::int64_t n,
                std::int64_t k, const launch_options& launch = {});

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace qpolicy::cuda
