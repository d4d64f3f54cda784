#pragma once
// gemm_bench's quantized linear layers at decode and prefill batches: every shorthand's layer (its
// expert GEMM for the schemes that quantize experts only) on Llama-3.1-8B's MLP shapes, against the
// float32 GEMM of the same shape on the same blocked kernel, measured in the same run.
#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <random>
#include <vector>

#include "best_time.hpp"
#include "qpolicy/kernels/cpu/forward.hpp"
#include "qpolicy/kernels/cpu/low_precision_forward.hpp"

namespace qpolicy::bench {

/// One shape's operands: the weight in bf16 and float32, an activation of `rows` rows per batch size.
struct linear_shape {
  std::int64_t n, k;
  std::vector<float> w_f32;
  std::vector<std::uint16_t> w_bf16;
};

/// The times of one forward call of Scheme's layer of weight w on x [m, k] and of `baseline`, run in
/// turns (the best of `runs` each), so that their ratio holds on a machine whose speed drifts.
template <class Scheme>
std::pair<double, double> time_layer(const linear_shape& s, const std::vector<std::uint16_t>& x, std::int64_t m,
                                     std::vector<std::uint16_t>& out, int runs, const std::function<void()>& baseline) {
  const input_view w{s.w_bf16.data(), element::bf16, s.n, s.k}, xv{x.data(), element::bf16, m, s.k};
  if constexpr (cpu::has_linear_layer<Scheme>) {
    const auto layer = cpu::quantize_linear<Scheme>(w, nullptr);
    return best_seconds_alternating(runs, [&] { cpu::linear_forward(layer, xv, out.data()); }, baseline);
  } else {
    // An experts-only scheme: one expert's GEMM of this shape, with the row's MoE activation treatment.
    const auto q = cpu::detail::quantize_matrix<cpu::detail::weight_formula<Scheme>>(w, 0);
    std::vector<float> y(static_cast<std::size_t>(m * s.n));
    return best_seconds_alternating(
        runs,
        [&] {
          const auto xf = cpu::detail::widen_all(xv);
          cpu::detail::lp_matmul<Scheme>(schemes::treatment_of(Scheme::id, layer_kind::moe), xf.data(), m, q, nullptr, y.data(), {});
          cpu::detail::store_bf16(y, out.data());
        },
        baseline);
  }
}

}  // namespace qpolicy::bench
