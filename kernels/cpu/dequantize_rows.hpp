#pragma once
// Internal to kernels/cpu: the decoder's runs in portable SIMD (dequantize_rows.cpp).
#include <cstdint>

#include "qpolicy/numerics/tensor_view.hpp"
#include "qpolicy/schemes/formulas.hpp"

namespace qpolicy::cpu::detail {

/// Elements [first, first + n) of codes in `format` (first and n even for packed e2m1; not lut3_tiles,
/// which decodes by tiles), each code's value times s rounded to `type`, into out[0, n).
void dequantize_run(schemes::code_format format, const std::uint8_t* codes, std::int64_t first, std::int64_t n, float s, element type,
                    void* out);

}  // namespace qpolicy::cpu::detail
