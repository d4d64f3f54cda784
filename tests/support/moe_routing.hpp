#pragma once
// A fixed, spread-out routing for MoE tests and benchmarks: token t's j-th choice is expert
// (t * token_stride + j * choice_stride) % experts, every weight 1 / top_k.
#include <cstdint>
#include <vector>

#include "qpolicy/kernels/cpu/forward.hpp"

namespace qpolicy::test {

/// The expert ids and weights of every token, and the routing view the forward passes take.
struct strided_routing {
  std::int64_t top_k;
  std::vector<std::int32_t> ids;
  std::vector<float> weights;

  strided_routing(std::int64_t tokens, std::int64_t top_k_, std::int64_t experts, std::int64_t token_stride, std::int64_t choice_stride)
      : top_k(top_k_), ids(static_cast<std::size_t>(tokens * top_k_)), weights(ids.size(), 1.0f / static_cast<float>(top_k_)) {
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t j = 0; j < top_k; ++j)
        ids[static_cast<std::size_t>(t * top_k + j)] = static_cast<std::int32_t>((t * token_stride + j * choice_stride) % experts);
  }
  cpu::routing view() const { return {ids.data(), weights.data(), top_k}; }
};

}  // namespace qpolicy::test
