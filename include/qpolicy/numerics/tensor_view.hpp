#pragma once
// What the quantization kernels read and write: a 2-D row-major input of bf16, fp16 or fp32 elements
// (an expert's matrix, a layer's weight, a batch of activations) and the outputs they fill.
#include <cstdint>
#include <cstring>

#include "numerics.hpp"

namespace qpolicy {

/// Element types a kernel reads.
enum class element : std::uint8_t { bf16, f16, f32 };

/// A row-major [rows, cols] input; `at` widens one element to float32 exactly. 64-bit indices.
struct input_view {
  const void* data = nullptr;
  element type = element::bf16;
  std::int64_t rows = 0, cols = 0;

  /// Loads through memcpy: file data may sit at any byte offset (safetensors promises no alignment),
  /// and a memcpy of 2 or 4 bytes compiles to one plain load.
  QPOLICY_HD float at(std::int64_t i) const {
    const char* p = static_cast<const char*>(data);
    if (type == element::f32) {
      float v;
      std::memcpy(&v, p + i * 4, 4);
      return v;
    }
    std::uint16_t h;
    std::memcpy(&h, p + i * 2, 2);
    return type == element::bf16 ? fp8::from_bf16(h) : fp8::from_fp16(h);
  }
  QPOLICY_HD float at(std::int64_t r, std::int64_t c) const { return at(r * cols + c); }
  QPOLICY_HD std::int64_t size() const { return rows * cols; }
  /// Rows [first, first + count) as a view of their own.
  QPOLICY_HD input_view rows_from(std::int64_t first, std::int64_t count) const {
    const auto bytes = type == element::f32 ? 4 : 2;
    return {static_cast<const char*>(data) + first * cols * bytes, type, count, cols};
  }
};

}  // namespace qpolicy

namespace qpolicy::fp8 {

/// Where a 1x128-group kernel stores scale (m, g) of an [M, G] scale tensor (spec §7).
enum class scale_layout : std::uint8_t {
  row_major,            // m*G + g
  column_major,         // g*M + m
  column_major_tma,     // g*M4 + m, M4 = ceil(M/4)*4 (padding slots written as 0)
};

/// Elements a scale tensor of `layout` occupies for M rows and G groups.
QPOLICY_HD std::int64_t scale_storage(scale_layout layout, std::int64_t m, std::int64_t g) {
  if (layout == scale_layout::column_major_tma) return g * ((m + 3) / 4 * 4);
  return m * g;
}
QPOLICY_HD std::int64_t scale_offset(scale_layout layout, std::int64_t m_rows, std::int64_t groups, std::int64_t m,
                                std::int64_t g) {
  switch (layout) {
    case scale_layout::row_major: return m * groups + g;
    case scale_layout::column_major: return g * m_rows + m;
    default: return g * ((m_rows + 3) / 4 * 4) + m;
  }
}

/// Options of the 1x128 group quantizer (§7).
struct group_options {
  std::int64_t group_size = 128;
  bool ue8m0 = false;
  scale_layout layout = scale_layout::row_major;
};

/// Options of the 128x128 block quantizer (§8).
struct block_options {
  bool ue8m0 = false;
  bool compiled_variant = false;  // sf = a * f32(1/448), as torch.compile may rewrite it
};

}  // namespace qpolicy::fp8

namespace qpolicy {

/// Where a formula's quantizer writes, each part in the storage of its formula row
/// (schemes::formula_row says which parts a formula has; the others stay null).
struct quantized_outputs {
  std::uint8_t* codes = nullptr;  // e4m3 / int8 [rows, cols], or packed e2m1 [rows, cols / 2]
  void* scales = nullptr;         // first-level scales: float32, or E8M0 / e4m3 bytes (row-major or the 128x4 layout)
  float* second = nullptr;        // the second-level scale: [1] per tensor, [rows] per token
  std::uint8_t* codebook = nullptr;  // LUT-B's e4m3 codebooks, eight per tile
};

/// The options of a formula's quantizer (schemes::formula_row::options says which apply to it).
struct quantize_options {
  bool ue8m0 = false;                                       // FP8 groups and blocks: power-of-two scales
  fp8::scale_layout layout = fp8::scale_layout::row_major;  // FP8 1x128 groups
  bool swizzled = false;  // byte block scales in the 128x4 layout (the caller zero-fills them: padding stays 0)
  bool has_amax = false;  // the per-tensor scale from `amax` instead of the tensor's own (formula_row::takes_amax)
  float amax = 0.0f;
  std::int64_t transform_size = 0;  // a rotating formula's Hadamard size, when not its row's (any power of two)
};

}  // namespace qpolicy
