#pragma once
// gemm_bench's quantized linear layers at decode and prefill batches: every shorthand's layer (its
// expert GEMM for the schemes that quantize experts only) on Llama-3.1-8B's MLP shapes, against the
// float32 GEMM of the same shape on the same blocked kernel, measured in the same run.
#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <random>
#include <vector>

#include "qpolicy/kernels/cpu/forward.hpp"
#include "qpolicy/kernels/cpu/weight_only_forward.hpp"

namespace qpolicy::bench {

/// One shape's operands: the weight in bf16 and float32, an activation of `rows` rows per batch size.
struct linear_shape {
  std::int64_t n, k;
  std::vector<float> w_f32;
  std::vector<std::uint16_t> w_bf16;
};

/// A forward call of Scheme's layer of weight w on an activation x [m, k] into out (bf16), as a
/// callable that owns the layer (quantized once, here) and any scratch it needs.
using layer_call = std::function<void(const std::vector<std::uint16_t>& x, std::int64_t m, std::vector<std::uint16_t>& out)>;
template <class Scheme>
layer_call make_layer_call(const linear_shape& s) {
  const input_view w{s.w_bf16.data(), element::bf16, s.n, s.k};
  const std::int64_t k = s.k, n = s.n;
  if constexpr (cpu::has_linear_layer<Scheme>) {
    auto layer = std::make_shared<const decltype(cpu::quantize_linear<Scheme>(w, nullptr))>(cpu::quantize_linear<Scheme>(w, nullptr));
    return [layer, k](const std::vector<std::uint16_t>& x, std::int64_t m, std::vector<std::uint16_t>& out) {
      cpu::linear_forward(*layer, input_view{x.data(), element::bf16, m, k}, out.data());
    };
  } else {
    // An experts-only scheme: one expert's GEMM of this shape, with the row's MoE activation treatment.
    auto q = std::make_shared<const cpu::quantized_matrix>(cpu::detail::quantize_matrix<cpu::detail::weight_formula<Scheme>>(w, 0));
    auto y = std::make_shared<std::vector<float>>();
    return [q, y, k, n](const std::vector<std::uint16_t>& x, std::int64_t m, std::vector<std::uint16_t>& out) {
      y->resize(static_cast<std::size_t>(m * n));
      const auto xf = cpu::detail::widen_all(input_view{x.data(), element::bf16, m, k});
      cpu::detail::weight_only_layer_matmul<Scheme>(schemes::treatment_of(Scheme::id, layer_kind::moe), xf.data(), m, *q, nullptr, y->data(), {});
      cpu::detail::store_bf16(*y, out.data());
    };
  }
}

}  // namespace qpolicy::bench
