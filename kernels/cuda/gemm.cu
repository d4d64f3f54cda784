// FP8 GEMMs on the GPU: cuBLASLt where it can run the problem, the fallback kernel elsewhere.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <stdexcept>
#include <tuple>

#include "qpolicy/kernels/cuda/detail/cuda_check.hpp"
#include "qpolicy/kernels/cuda/device_info.hpp"
#include "qpolicy/kernels/cuda/gemm.hpp"

namespace qpolicy::cuda {

namespace {

using detail::check;
void check(cublasStatus_t st, const char* call, const launch_options& o) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw cuda_error(std::string(call) + " failed" + (o.layer.empty() ? std::string() : " for layer " + o.layer) + ": " +
                     cublasLtGetStatusName(st) + " (" + cublasLtGetStatusString(st) + ")");
}

/// The fallback: one thread per output, the CPU reference's operations in its order (explicit
/// round-to-nearest adds and multiplies, so nvcc cannot contract them into FMAs).
struct fallback_args {
  const std::uint8_t* a;
  const float* a_scale;
  const std::uint8_t* w;
  const float* w_scale;
  std::int64_t w_stride;
  const std::uint16_t* bias;
  std::uint16_t* out;
  std::int64_t m, n, k;
  fp8::activation_quant act;
  fp8::weight_scales weights;
};

__global__ void fallback_gemm(fallback_args g) {
  const std::int64_t j = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (j >= g.n) return;
  for (std::int64_t i = blockIdx.y; i < g.m; i += gridDim.y) {
    const std::uint8_t* ar = g.a + i * g.k;
    const std::uint8_t* wr = g.w + j * g.k;
    float v;
    if (g.weights == fp8::weight_scales::block_128x128) {
      const std::int64_t chunks = g.k / 128;
      float acc = 0.0f;
      for (std::int64_t kb = 0; kb < chunks; ++kb) {
        float partial = 0.0f;
        for (std::int64_t t = kb * 128; t < kb * 128 + 128; ++t)
          partial = __fadd_rn(partial, __fmul_rn(fp8::decode(ar[t]), fp8::decode(wr[t])));
        const float as = g.a_scale[kb * g.m + i], ws = g.w_scale[(j / 128) * g.w_stride + kb];
        acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(partial, as), ws));
      }
      v = acc;
    } else {
      float acc = 0.0f;
      for (std::int64_t t = 0; t < g.k; ++t) acc = __fadd_rn(acc, __fmul_rn(fp8::decode(ar[t]), fp8::decode(wr[t])));
      const float sa = g.a_scale[g.act == fp8::activation_quant::per_token ? i : 0];
      const float sw = g.w_scale[g.weights == fp8::weight_scales::per_channel ? j : 0];
      v = __fmul_rn(__fmul_rn(acc, sa), sw);
    }
    if (g.bias) v = __fadd_rn(v, fp8::from_bf16(g.bias[j]));
    g.out[i * g.n + j] = fp8::to_bf16(v);
  }
}

// cuBLASLt's scale mode of each scaling, indexed by the enum's value.
constexpr std::int32_t activation_modes[] = {CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
                                             CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F};
constexpr std::int32_t weight_modes[] = {CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
                                         CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F};
std::int32_t cublas_mode(fp8::activation_quant a) { return activation_modes[static_cast<int>(a)]; }
std::int32_t cublas_mode(fp8::weight_scales w) { return weight_modes[static_cast<int>(w)]; }

constexpr std::size_t workspace_bytes = 32u << 20;

}  // namespace

/// A cached cuBLASLt setup for one (shape, scaling): descriptors and the heuristic's algorithm.
struct cached_matmul {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool usable = false;
  std::string refused;  // why cuBLASLt has no algorithm, when !usable
  ~cached_matmul() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

struct gemm_runner::state {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  int sm = 0;
  std::string last_reason;
  // key: m, n, k, activation, weights, bias, bf16 baseline
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, int, int, bool, bool>, std::unique_ptr<cached_matmul>> cache;

  /// Descriptors for out = op(W) x X in cuBLASLt's column-major terms: A = W ([K, N], transposed),
  /// B = X ([K, M]), D = out ([N, M] column-major = [M, N] row-major). TN, as FP8 requires.
  cached_matmul& prepare(const gemm_problem& p, bool bf16_inputs, const launch_options& o) {
    const auto key = std::make_tuple(p.m, p.n, p.k, static_cast<int>(p.activation), static_cast<int>(p.weights), p.bias, bf16_inputs);
    auto& slot = cache[key];
    if (slot) return *slot;
    slot = std::make_unique<cached_matmul>();
    auto& c = *slot;
    check(cublasLtMatmulDescCreate(&c.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", o);
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "cublasLtMatmulDescSetAttribute", o);
    check(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "cublasLtMatmulDescSetAttribute", o);
    const cudaDataType_t in = bf16_inputs ? CUDA_R_16BF : CUDA_R_8F_E4M3;
    check(cublasLtMatrixLayoutCreate(&c.a, in, p.k, p.n, p.k), "cublasLtMatrixLayoutCreate (W)", o);
    check(cublasLtMatrixLayoutCreate(&c.b, in, p.k, p.m, p.k), "cublasLtMatrixLayoutCreate (A)", o);
    check(cublasLtMatrixLayoutCreate(&c.d, CUDA_R_16BF, p.n, p.m, p.n), "cublasLtMatrixLayoutCreate (out)", o);
    if (!bf16_inputs) {
      const std::int32_t mode_w = cublas_mode(p.weights), mode_a = cublas_mode(p.activation);
      check(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_w, sizeof mode_w),
            "cublasLtMatmulDescSetAttribute (A scale mode)", o);
      check(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_a, sizeof mode_a),
            "cublasLtMatmulDescSetAttribute (B scale mode)", o);
    }
    if (p.bias) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType_t bias_type = CUDA_R_16BF;
      check(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "cublasLtMatmulDescSetAttribute", o);
      check(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type),
            "cublasLtMatmulDescSetAttribute", o);
    }
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", o);
    const std::size_t ws = workspace_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const auto st = cublasLtMatmulAlgoGetHeuristic(handle, c.desc, c.a, c.b, c.d, c.d, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
      c.algo = result.algo;
      c.usable = true;
    } else {
      c.refused = std::string("cuBLASLt has no algorithm for this problem (") +
                  (st == CUBLAS_STATUS_SUCCESS ? "no heuristic result" : cublasLtGetStatusName(st)) + ")";
    }
    return c;
  }

  void matmul(cached_matmul& c, const void* w, const void* a, const float* w_scale, const float* a_scale,
              const std::uint16_t* bias, std::uint16_t* out, const launch_options& o) {
    if (w_scale) {
      check(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof w_scale),
            "cublasLtMatmulDescSetAttribute (A scale)", o);
      check(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale, sizeof a_scale),
            "cublasLtMatmulDescSetAttribute (B scale)", o);
    }
    if (bias)
      check(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
            "cublasLtMatmulDescSetAttribute (bias)", o);
    const float alpha = 1.0f, beta = 0.0f;
    check(cublasLtMatmul(handle, c.desc, &alpha, w, c.a, a, c.b, &beta, out, c.d, out, c.d, &c.algo, workspace,
                         workspace_bytes, static_cast<cudaStream_t>(o.stream)),
          "cublasLtMatmul", o);
  }
};

gemm_runner::gemm_runner() : state_(std::make_unique<state>()) {
  const launch_options o;
  check(cublasLtCreate(&state_->handle), "cublasLtCreate", o);
  check(cudaMalloc(&state_->workspace, workspace_bytes), "cudaMalloc (cuBLASLt workspace)", o);
  state_->sm = current_sm();
}

gemm_runner::~gemm_runner() {
  state_->cache.clear();
  if (state_->workspace) cudaFree(state_->workspace);
  if (state_->handle) cublasLtDestroy(state_->handle);
}

const std::string& gemm_runner::last_fallback_reason() const { return state_->last_reason; }

gemm_backend gemm_runner::run(const gemm_problem& p, const gemm_operands& op, const launch_options& o, gemm_backend prefer) {
  if (auto e = gemm_check(p, op); !e.empty())
    throw std::invalid_argument(o.layer.empty() ? e : "layer " + o.layer + ": " + e);
  state_->last_reason.clear();
  if (prefer == gemm_backend::cublaslt) {
    state_->last_reason = cublaslt_can_implement(p, op, state_->sm);
    if (state_->last_reason.empty()) {
      auto& c = state_->prepare(p, false, o);
      if (c.usable) {
        state_->matmul(c, op.w, op.a, op.w_scale, op.a_scale, p.bias ? op.bias : nullptr, op.out, o);
        return gemm_backend::cublaslt;
      }
      state_->last_reason = c.refused;
    }
  } else {
    state_->last_reason = "the fallback kernel was asked for";
  }
  const fallback_args g{op.a, op.a_scale, op.w, op.w_scale, op.w_scale_stride, p.bias ? op.bias : nullptr, op.out,
                        p.m, p.n, p.k, p.activation, p.weights};
  const dim3 block(128), grid(static_cast<unsigned>((p.n + 127) / 128), static_cast<unsigned>(p.m < 65535 ? p.m : 65535));
  fallback_gemm<<<grid, block, 0, static_cast<cudaStream_t>(o.stream)>>>(g);
  check(cudaGetLastError(), "fallback_gemm", o);
  return gemm_backend::fallback;
}

void gemm_runner::run_bf16(const std::uint16_t* a, const std::uint16_t* w, std::uint16_t* out, std::int64_t m,
                           std::int64_t n, std::int64_t k, const launch_options& o) {
  gemm_problem p;
  p.m = m;
  p.n = n;
  p.k = k;
  auto& c = state_->prepare(p, true, o);
  if (!c.usable) throw cuda_error("cuBLASLt bf16 GEMM " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + ": " + c.refused);
  state_->matmul(c, w, a, nullptr, nullptr, nullptr, out, o);
}

}  // namespace qpolicy::cuda
