#pragma once
// The registry's lists as the std::tuple type lists Catch2's TEMPLATE_LIST_TEST_CASE and the GPU
// suites walk: every list a test iterates comes from the registry, none is written out.
#include <tuple>

#include "qpolicy/schemes/registry.hpp"

namespace qpolicy::test {

/// Every formula (the six FP8 keys and the seven low-precision formulas).
using all_formulas = registry::as_list<std::tuple, decltype(registry::formula_types)>;
/// The FP8 formulas and the low-precision ones.
using fp8_formulas = registry::as_list<
    std::tuple, decltype(registry::where(registry::formula_types, [](schemes::formula f) { return !schemes::formula_of(f).low_precision(); }))>;
using low_precision_formulas = registry::as_list<std::tuple, decltype(registry::block_quantizer_formula_types)>;
/// Every (scheme, activation tag) pair of a linear and of a MoE layer, every scheme with kernels.
using linear_layer_pairs = registry::as_list<std::tuple, decltype(registry::layer_pair_types<layer_kind::linear>)>;
using moe_layer_pairs = registry::as_list<std::tuple, decltype(registry::layer_pair_types<layer_kind::moe>)>;
/// The schemes whose layers run the weight-only GEMM.
using weight_only_schemes = registry::as_list<std::tuple, decltype(registry::weight_only_scheme_types)>;

}  // namespace qpolicy::test
