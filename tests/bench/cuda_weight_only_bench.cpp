// The weight-only GEMMs of the low-precision schemes on the GPU, in TFLOPS, each against cuBLASLt's
// bf16 GEMM of the same shape measured in the same run: dense on DeepSeek-V3 and Qwen3-30B-A3B linear
// shapes, and the grouped W4A16 MoE (all experts in one launch) against a loop of one launch per
// expert. Weights are random codes and scales in each formula's storage (the kernel's cost does not
// depend on their values). Says why and exits 0 when there is no device.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "../gpu/device_buffer.hpp"
#include "best_gpu_time.hpp"
#include "qpolicy/kernels/cuda/gemm.hpp"
#include "qpolicy/kernels/cuda/weight_only_gemm.hpp"

namespace qp = qpolicy;
namespace wo = qpolicy::lp::weight_only;
using qpolicy::bench::best_gpu_seconds;
using qpolicy::test::device_buffer;
using qp::schemes::formula;

namespace {

std::vector<std::uint8_t> random_bytes(std::size_t n, std::mt19937& rng, std::uint8_t lo, std::uint8_t hi) {
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(lo + rng() % (hi - lo + 1));
  return v;
}

/// Operands of `experts` weight matrices [n, k] of formula F, and activations [rows, k].
template <formula F>
struct operands {
  device_buffer<std::uint16_t> a, out;
  device_buffer<std::uint8_t> codes, scales;
  device_buffer<float> row_scales, tensor_scales, a_scale;
  wo::problem p;
  operands(std::int64_t rows, std::int64_t n, std::int64_t k, std::int64_t experts, std::mt19937& rng)
      : a(std::vector<std::uint16_t>(static_cast<std::size_t>(rows * k), 0x3F80)),
        out(static_cast<std::size_t>(rows * n)),
        codes(random_bytes(static_cast<std::size_t>(experts * qp::schemes::code_bytes(qp::schemes::formula_of(F), n, k)), rng, 0, 0x7E)),
        scales(random_bytes(static_cast<std::size_t>(experts * n * qp::schemes::scales_per_row(qp::schemes::formula_of(F), k)), rng, 100, 127)),
        row_scales(std::vector<float>(static_cast<std::size_t>(experts * n), 0.01f)),
        tensor_scales(std::vector<float>(static_cast<std::size_t>(experts), 0.01f)),
        a_scale(std::vector<float>(static_cast<std::size_t>(rows), 1.0f)) {
    const auto& f = qp::schemes::formula_of(F);
    const bool int8 = F == formula::int8_per_channel, nvfp4 = F == formula::nvfp4_weight;
    p = {a.ptr, codes.ptr, int8 ? nullptr : scales.ptr, int8 ? row_scales.ptr : nullptr, nvfp4 ? tensor_scales.ptr : nullptr,
         nvfp4 ? a_scale.ptr : nullptr, qp::schemes::code_bytes(f, n, k), n * qp::schemes::scales_per_row(f, k), out.ptr, n, k};
  }
};

template <formula F>
void dense(qp::cuda::gemm_runner& runner, const char* shape, std::int64_t m, std::int64_t n, std::int64_t k, std::mt19937& rng) {
  operands<F> o(m, n, k, 1, rng);
  const std::int64_t offsets[] = {0, m};
  const double s = best_gpu_seconds(5, [&] { qp::cuda::weight_only_gemm<qp::formula_tag<F>>(o.p, offsets, 1); });
  device_buffer<std::uint16_t> w(static_cast<std::size_t>(n * k)), out(static_cast<std::size_t>(m * n));
  const double base = best_gpu_seconds(5, [&] { runner.run_bf16(o.a.ptr, w.ptr, out.ptr, m, n, k); });
  const double flops = 2.0 * double(m) * double(n) * double(k);
  std::printf("bench: cuda_weight_only_%s_%s %.1f TFLOPS vs cublaslt_bf16 %.2fx\n", std::string(qp::schemes::formula_of(F).name).c_str(),
              shape, flops / s / 1e12, base / s);
}

/// Grouped W4A16 MoE (Qwen3-30B-A3B's w13: E = 128, [2I, H] = [1536, 2048], 8 of 128 experts per token):
/// one launch over every expert against one launch per expert.
template <formula F>
void grouped(std::int64_t tokens, std::mt19937& rng) {
  const std::int64_t experts = 128, n = 1536, k = 2048, rows = tokens * 8;
  operands<F> o(rows, n, k, experts, rng);
  std::vector<std::int64_t> offsets(experts + 1);
  for (std::int64_t e = 0; e <= experts; ++e) offsets[static_cast<std::size_t>(e)] = rows * e / experts;
  // Tile tables uploaded before timing, for both: the grouped launch's and one per expert.
  const auto all_tiles = qp::fp8::grouped::make_tiles(offsets.data(), experts);
  const device_buffer<wo::tile> table(all_tiles);
  std::vector<device_buffer<wo::tile>> expert_tables;
  std::vector<std::int64_t> expert_tile_counts;
  for (std::int64_t e = 0; e < experts; ++e) {
    const std::int64_t one[] = {0, offsets[static_cast<std::size_t>(e) + 1] - offsets[static_cast<std::size_t>(e)]};
    const auto t = qp::fp8::grouped::make_tiles(one, 1);
    expert_tile_counts.push_back(static_cast<std::int64_t>(t.size()));
    expert_tables.emplace_back(t.empty() ? std::vector<wo::tile>{wo::tile{}} : t);
  }
  const double all = best_gpu_seconds(
      5, [&] { qp::cuda::weight_only_gemm_tiles<qp::formula_tag<F>>(o.p, table.ptr, static_cast<std::int64_t>(all_tiles.size())); });
  const double loop = best_gpu_seconds(3, [&] {
    for (std::int64_t e = 0; e < experts; ++e) {
      auto p = o.p;
      const std::int64_t first = offsets[static_cast<std::size_t>(e)];
      p.a += first * k;
      p.out += first * n;
      p.codes += e * p.code_step;
      if (p.block_scales) p.block_scales += e * p.scale_step;
      if (p.tensor_scales) p.tensor_scales += e;
      if (p.a_scale) p.a_scale += first;
      qp::cuda::weight_only_gemm_tiles<qp::formula_tag<F>>(p, expert_tables[static_cast<std::size_t>(e)].ptr,
                                                            expert_tile_counts[static_cast<std::size_t>(e)]);
    }
  });
  const double flops = 2.0 * double(rows) * double(n) * double(k);
  std::printf("bench: cuda_grouped_w4a16_%s_moe_%lldtok %.1f TFLOPS vs per_expert_loop %.2fx\n",
              std::string(qp::schemes::formula_of(F).name).c_str(), static_cast<long long>(tokens), flops / all / 1e12, loop / all);
}

}  // namespace

int main() {
  if (!qpolicy::test::have_device("weight-only GEMM benchmark")) return 0;
  qp::cuda::gemm_runner runner;
  std::mt19937 rng(1);
  // DeepSeek-V3 (hidden 7168: q_a/kv_a projections [2112, 7168]; dense MLP down [7168, 18432]) and
  // Qwen3-30B-A3B attention (qkv [5120, 2048]), 2048 tokens.
  const struct {
    const char* name;
    std::int64_t n, k;
  } shapes[] = {{"dsv3_qkv_a_2112x7168", 2112, 7168}, {"dsv3_down_7168x18432", 7168, 18432}, {"qwen3_qkv_5120x2048", 5120, 2048}};
  for (const auto& s : shapes) {
    dense<formula::mxfp8_torch>(runner, s.name, 2048, s.n, s.k, rng);
    dense<formula::mxfp4_even>(runner, s.name, 2048, s.n, s.k, rng);
    dense<formula::int8_per_channel>(runner, s.name, 2048, s.n, s.k, rng);
    dense<formula::nvfp4_weight>(runner, s.name, 2048, s.n, s.k, rng);
  }
  for (const std::int64_t tokens : {256, 4096}) {
    grouped<formula::mxfp4_even>(tokens, rng);
    grouped<formula::nvfp4_weight>(tokens, rng);
  }
  return 0;
}
