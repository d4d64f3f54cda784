#pragma once
// Reading shared/conformance/new_schemes_cases.json (QPOLICY_NEW_SCHEMES_CASES): vLLM 0.34's Hadamard
// rotation with MXFP4 and LUT-B (new-schemes-numerics.md). Inputs and hex as low_precision_cases.hpp;
// a 3-D [E, N, K] input is read as [E * N, K] (LUT-B tiles never cross experts when N % 8 == 0).
#include <cstdint>
#include <string_view>
#include <vector>

#include "low_precision_cases.hpp"

namespace qpolicy::test::new_schemes {

using namespace qpolicy::test::low_precision;

/// The cases of a kind, in file order (at least one).
inline std::vector<const bj::object*> new_cases(std::string_view kind) {
  return conformance_cases_of_kind("QPOLICY_NEW_SCHEMES_CASES", kind);
}

/// Calls fn(case, its input tensor, its output object) for every case of `kind`, the id in failures.
template <class Fn>
void for_each_new_case(std::string_view kind, Fn&& fn) {
  for (const auto* c : new_cases(kind)) {
    INFO(c->at("id").as_string());
    fn(*c, input_of(c->at("input")), c->at("output").as_object());
  }
}

}  // namespace qpolicy::test::new_schemes
