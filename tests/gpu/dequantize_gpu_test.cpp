// GPU suite: the decoder on the device (cuda::dequantize) against the CPU decoder (cpu::dequantize),
// byte for byte, for every row of the formula table, every output type it decodes to, block scales
// row-major and in the 128x4 layout. The stored tensors are random bytes (every code, NaN and the
// E8M0 extremes among them): a decoder reads any bytes. Exits 77 (skipped) without a usable device.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "qpolicy/kernels/cpu/dequantize.hpp"
#include "qpolicy/kernels/cuda/block_quantizer.hpp"
#include "device_buffer.hpp"

namespace qp = qpolicy;
namespace schemes = qpolicy::schemes;

namespace {

/// The first element where two decodes differ, or -1: equal bits, or NaN in both (a NaN's sign and
/// payload are the hardware's: the GPU's multiply gives the canonical NaN, x86's keeps the operand's).
std::int64_t first_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b, qp::element type) {
  const bool f32 = type == qp::element::f32;
  const std::size_t width = f32 ? 4 : 2;
  for (std::size_t i = 0; i < a.size() / width; ++i) {
    std::uint32_t x = 0, y = 0;
    std::memcpy(&x, a.data() + i * width, width);
    std::memcpy(&y, b.data() + i * width, width);
    if (x == y) continue;
    const auto is_nan = [&](std::uint32_t v) {
      if (f32) return (v & 0x7FFFFFFFu) > 0x7F800000u;
      if (type == qp::element::bf16) return (v & 0x7FFFu) > 0x7F80u;
      return (v & 0x7FFFu) > 0x7C00u;
    };
    if (!(is_nan(x) && is_nan(y))) return static_cast<std::int64_t>(i);
  }
  return -1;
}

}  // namespace

int main() {
  if (!qp::test::have_device("device decoder test")) return 77;
  std::mt19937 rng(23);
  // 136 rows: whole 8-row LUT-B tiles and a partial 128-row tile of the 128x4 layout; 512 columns:
  // whole 128-blocks, LUT-B's 64-column tiles and a 4-scale row of 32-blocks in the 128x4 layout.
  const std::int64_t rows = 136, cols = 512;
  // Every part over-allocated: the decoder reads what the formula's layout holds, and no more.
  const std::size_t bytes = static_cast<std::size_t>(256 * cols) * 4;
  auto random_bytes = [&] {
    std::vector<std::uint8_t> v(bytes);
    for (auto& b : v) b = static_cast<std::uint8_t>(rng());
    return v;
  };
  auto random_floats = [&] {
    std::uniform_real_distribution<float> scale(1e-4f, 4.0f);
    std::vector<float> v(bytes / 4);
    for (auto& f : v) f = scale(rng);
    return v;
  };
  const auto codes = random_bytes(), byte_scales = random_bytes(), codebooks = random_bytes();
  const auto float_scales = random_floats(), second = random_floats();
  const qp::cuda::device_array<std::uint8_t> d_codes(codes), d_byte_scales(byte_scales), d_codebooks(codebooks);
  const qp::cuda::device_array<float> d_float_scales(float_scales), d_second(second);
  int compared = 0;
  using qp::test::fail;
  for (const auto& f : schemes::formula_table) {
    const bool float_scaled = f.scales == schemes::scale_format::f32;
    for (const bool swizzled : {false, true}) {
      if (swizzled && (f.options != schemes::scale_options::byte_blocks || f.tiled())) continue;
      const qp::stored_tensors host{codes.data(), float_scaled ? static_cast<const void*>(float_scales.data()) : byte_scales.data(),
                                    second.data(), codebooks.data(), rows, cols, swizzled};
      const qp::stored_tensors device{d_codes.ptr, float_scaled ? static_cast<const void*>(d_float_scales.ptr) : d_byte_scales.ptr,
                                      d_second.ptr, d_codebooks.ptr, rows, cols, swizzled};
      for (const auto type : {qp::element::bf16, qp::element::f16, qp::element::f32}) {
        if (f.tiled() && type == qp::element::f32) continue;  // LUT-B decodes to bf16 or fp16 only
        const std::size_t out_bytes = static_cast<std::size_t>(rows * cols) * (type == qp::element::f32 ? 4 : 2);
        std::vector<std::uint8_t> want(out_bytes);
        qp::cpu::dequantize(f.id, host, type, want.data());
        qp::cuda::device_array<std::uint8_t> out(out_bytes);
        qp::cuda::dequantize(f.id, device, type, out.ptr);
        const auto got = out.get(out_bytes);
        if (const auto first = first_difference(got, want, type); first >= 0)
          fail(std::string(f.name) + (swizzled ? " (128x4 scales)" : "") + ", output type " + std::to_string(static_cast<int>(type)) +
               ": the device decode differs from the CPU's, first at element " + std::to_string(first));
        ++compared;
      }
    }
  }
  std::printf("%d formula, layout and output type triples compared, %d failures\n", compared, qp::test::failures);
  return qp::test::failures ? 1 : 0;
}
