#pragma once
// The low-precision quantizers behind one interface for the tests: output buffers sized from the
// formula contract, and the CPU reference and the CPU fast path (and, in the GPU suite, CUDA) writing
// into them, so one check runs against every implementation.
#include <cstdint>
#include <vector>

#include "qpolicy/kernels/cpu/reference.hpp"
#include "qpolicy/kernels/cpu/vectorized.hpp"
#include "qpolicy/numerics/detail/quantize_blocks.hpp"
#include "qpolicy/schemes/formulas.hpp"

namespace qpolicy::test::low_precision {

/// Host buffers for every output a formula may have, sized for [rows, cols].
struct quantizer_buffers {
  std::vector<std::uint8_t> codes, block_scales, codebook;
  std::vector<float> row_scales, tensor_scale;
  bool swizzled = false;
  std::int64_t rows = 0, per_row = 0;

  quantizer_buffers(schemes::formula id, std::int64_t r, std::int64_t cols, bool swizzle) : swizzled(swizzle), rows(r) {
    const auto& f = schemes::formula_of(id);
    per_row = schemes::scales_per_row(f, cols);
    const auto shape = schemes::block_scale_shape(f, rows, cols, swizzled);
    codes.assign(static_cast<std::size_t>(schemes::code_bytes(f, rows, cols)), 0xA5);  // not a result by chance
    if (f.scales != schemes::scale_format::f32) block_scales.assign(static_cast<std::size_t>(shape[0] * shape[1]), 0);
    if (f.second == schemes::second_scale::codebook)
      codebook.assign(static_cast<std::size_t>(schemes::scale_count(f, rows, cols) * schemes::lut_codebook_size), 0xA5);
    row_scales.assign(static_cast<std::size_t>(rows), -1.0f);
    tensor_scale.assign(1, -1.0f);
  }
  /// The buffers as formula f's outputs: float32 scales and per-token second scales in row_scales.
  quantized_outputs outputs(const schemes::formula_row& f) {
    void* scales = block_scales.empty() ? static_cast<void*>(row_scales.data()) : block_scales.data();
    return {codes.data(), scales, f.second == schemes::second_scale::per_token ? row_scales.data() : tensor_scale.data(),
            codebook.empty() ? nullptr : codebook.data()};
  }
  /// Block scale (r, j) wherever the layout keeps it.
  std::uint8_t block_scale(std::int64_t r, std::int64_t j) const {
    return block_scales[static_cast<std::size_t>(lp::block_scale_offset(r, j, per_row, swizzled))];
  }
  /// The block scales in row-major order.
  std::vector<std::uint8_t> row_major_scales() const {
    std::vector<std::uint8_t> out;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < per_row; ++j) out.push_back(block_scale(r, j));
    return out;
  }
};

/// The CPU reference of formula tag Formula into `out` (block scales in its layout).
template <class Formula>
void reference_quantize(const qpolicy::input_view& x, quantizer_buffers& out) {
  cpu::reference::quantize<Formula>(x, out.outputs(schemes::formula_of(Formula::id)), {false, {}, out.swizzled});
}

/// The CPU fast path of formula tag Formula into `out`.
template <class Formula>
void fast_quantize(const qpolicy::input_view& x, quantizer_buffers& out, unsigned threads = 3) {
  cpu::quantize<Formula>(x, out.outputs(schemes::formula_of(Formula::id)), {false, {}, out.swizzled}, {threads});
}

}  // namespace qpolicy::test::low_precision
