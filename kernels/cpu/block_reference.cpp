#include "qpolicy/kernels/cpu/block_reference.hpp"

#include <cmath>
#include <vector>

#include "qpolicy/numerics/detail/lut_b_tile.hpp"

#include "qpolicy/numerics/block_formats.hpp"

namespace qpolicy::cpu::reference {

using namespace fp8;

namespace {
constexpr std::int64_t mx_block = 32;

float amax_ignoring_nan(const input_view& x, std::int64_t first) {
  float a = 0.0f;
  for (std::int64_t i = 0; i < mx_block; ++i) a = max_num(a, abs_f32(x.at(first + i)));
  return a;
}

/// FlashInfer's inverse scale for byte b (§3.3 step 4): 2^(127 - b), but 0 for b = 0 and b = 254.
float flashinfer_inverse(std::uint8_t b) {
  return b == 0 ? 0.0f : float_of(static_cast<std::uint32_t>(b < 254 ? 254 - b : 0) << 23);
}

/// Packs the e2m1 codes of one 32-block, x[first..first+32) times `multiplier`, into 16 bytes.
void pack_block(const input_view& x, std::int64_t first, float multiplier, std::uint8_t* out) {
  for (std::int64_t i = 0; i < mx_block; i += 2)
    out[i / 2] = lp::e2m1_pack(lp::e2m1_encode(x.at(first + i) * multiplier), lp::e2m1_encode(x.at(first + i + 1) * multiplier));
}
}  // namespace

void mxfp8_torch(const input_view& x, std::uint8_t* q, std::uint8_t* scales) {
  const std::int64_t blocks = x.cols / mx_block;
  const float tiny = float_of(0x00800000u);
  for (std::int64_t r = 0; r < x.rows; ++r)
    for (std::int64_t j = 0; j < blocks; ++j) {
      const std::int64_t first = r * x.cols + j * mx_block;
      float a = 0.0f;
      for (std::int64_t i = 0; i < mx_block; ++i) a = max_nan(a, abs_f32(x.at(first + i)));  // amaxT
      a = max_nan(a, tiny);                                                                   // clamp(min=tiny)
      const std::uint8_t b = lp::e8m0_ceil(a / max_e4m3);
      // torch divides by the float scale 2^(b - 127); for a NaN block that scale is NaN (its uint8
      // byte is 0), so every code is NaN.
      const float scale = is_nan(a) ? a : lp::e8m0_value(b);
      for (std::int64_t i = 0; i < mx_block; ++i) q[first + i] = tcvt(x.at(first + i) / scale);
      scales[r * blocks + j] = b;
    }
}

void mxfp8_flashinfer(const input_view& x, std::uint8_t* q, std::uint8_t* scales) {
  const std::int64_t blocks = x.cols / mx_block;
  const float r448 = float_of(inv_448_bits);
  for (std::int64_t r = 0; r < x.rows; ++r)
    for (std::int64_t j = 0; j < blocks; ++j) {
      const std::int64_t first = r * x.cols + j * mx_block;
      const std::uint8_t b = lp::e8m0_round_up(amax_ignoring_nan(x, first) * r448);
      const float inv = flashinfer_inverse(b);
      for (std::int64_t i = 0; i < mx_block; ++i) q[first + i] = sat(x.at(first + i) * inv);
      scales[r * blocks + j] = b;
    }
}

void mxfp4_even(const input_view& x, std::uint8_t* q, std::uint8_t* scales) {
  const std::int64_t blocks = x.cols / mx_block;
  for (std::int64_t r = 0; r < x.rows; ++r)
    for (std::int64_t j = 0; j < blocks; ++j) {
      const std::int64_t first = r * x.cols + j * mx_block;
      const std::uint8_t b = lp::e8m0_even(amax_ignoring_nan(x, first));
      // qs = f32(1 / E8(b)) = 2^(127 - b): exact, 2^127 for b = 0 (no flush to zero, §11).
      pack_block(x, first, 1.0f / lp::e8m0_value(b), q + first / 2);
      scales[r * blocks + j] = b;
    }
}

void mxfp4_flashinfer(const input_view& x, std::uint8_t* q, std::uint8_t* scales) {
  const std::int64_t blocks = x.cols / mx_block;
  const float r6 = float_of(0x3E2AAAABu);  // f32(1/6); rcp.approx(6) ASSUMED equal (§11)
  for (std::int64_t r = 0; r < x.rows; ++r)
    for (std::int64_t j = 0; j < blocks; ++j) {
      const std::int64_t first = r * x.cols + j * mx_block;
      const std::uint8_t b = lp::e8m0_round_up(amax_ignoring_nan(x, first) * r6);
      pack_block(x, first, flashinfer_inverse(b), q + first / 2);
      scales[r * blocks + j] = b;
    }
}

void int8_per_channel(const input_view& w, std::int8_t* q, float* scales) {
  for (std::int64_t r = 0; r < w.rows; ++r) {
    float a = 0.0f;
    for (std::int64_t k = 0; k < w.cols; ++k) a = max_nan(a, abs_f32(w.at(r, k)));  // amaxT, exact in D
    const float s = lp::round_to(w.type, a / 127.0f);
    for (std::int64_t k = 0; k < w.cols; ++k) {
      const float t = lp::round_to(w.type, w.at(r, k) / s);  // the D-rounded quotient: two roundings
      const float n = std::nearbyint(t);                     // half to even (the default rounding mode)
      q[r * w.cols + k] = static_cast<std::int8_t>(is_nan(n) ? 0.0f : n > 127.0f ? 127.0f : n < -127.0f ? -127.0f : n);
    }
    scales[r] = s;
  }
}

namespace {
constexpr std::int64_t nv_block = 16;

/// One NVFP4 16-block: its e4m3 scale byte from the block's amax times `encode` (the global or per-token
/// encode scale), returned, and its packed codes in `out`. The output scale is 0, so are the codes,
/// when the block's scale is zero (weights) or its amax is zero (per-token activations).
std::uint8_t nvfp4_block(const input_view& x, std::int64_t first, float encode, bool zero_if_scale_zero, std::uint8_t* out) {
  const float r6 = float_of(0x3E2AAAABu);  // f32(1/6)
  float v = 0.0f;
  for (std::int64_t i = 0; i < nv_block; ++i) v = max_num(v, abs_f32(x.at(first + i)));  // amaxN
  const std::uint8_t sf = sat(encode * (v * r6));
  const float scale = decode(sf);
  // The weight kernel tests the block scale, the per-token kernel the block amax (§6.2 step 4, §6.3).
  const bool zero = zero_if_scale_zero ? scale == 0.0f : v == 0.0f;
  const float os = zero ? 0.0f : 1.0f / (scale * (1.0f / encode));
  for (std::int64_t i = 0; i < nv_block; i += 2)
    out[i / 2] = lp::e2m1_pack(lp::e2m1_encode(x.at(first + i) * os), lp::e2m1_encode(x.at(first + i + 1) * os));
  return sf;
}
}  // namespace

nvfp4_global nvfp4_weight(const input_view& w, std::uint8_t* q, std::uint8_t* sf, const float* given_amax) {
  float a = 0.0f;
  if (given_amax) a = *given_amax;
  else
    for (std::int64_t i = 0; i < w.size(); ++i) a = max_nan(a, abs_f32(w.at(i)));  // amaxT
  a = max_nan(a, float_of(0x322BCC77u));                                          // max(., f32(1e-8))
  nvfp4_global g;
  g.global_scale = (1.0f / a) * 2688.0f;  // torch: tensor.reciprocal() * python_float
  g.weight_scale_2 = 1.0f / g.global_scale;
  const std::int64_t blocks = w.cols / nv_block;
  for (std::int64_t r = 0; r < w.rows; ++r)
    for (std::int64_t j = 0; j < blocks; ++j) {
      const std::int64_t first = r * w.cols + j * nv_block;
      sf[r * blocks + j] = nvfp4_block(w, first, g.global_scale, true, q + first / 2);
    }
  return g;
}

void nvfp4_per_token(const input_view& x, std::uint8_t* q, std::uint8_t* sf, float* per_token) {
  const float g = float_of(0x39C30C31u);  // f32(1/2688)
  const std::int64_t blocks = x.cols / nv_block;
  for (std::int64_t r = 0; r < x.rows; ++r) {
    float ra = 0.0f;
    for (std::int64_t k = 0; k < x.cols; ++k) ra = max_num(ra, abs_f32(x.at(r, k)));  // amaxN
    const float st = ra * g;
    const float e = 1.0f / st;  // a zero row gives +inf
    for (std::int64_t j = 0; j < blocks; ++j) {
      const std::int64_t first = r * x.cols + j * nv_block;
      sf[r * blocks + j] = nvfp4_block(x, first, e, false, q + first / 2);
    }
    per_token[r] = st;
  }
}

void hadamard_rotate(const input_view& x, std::int64_t size, float* out) {
  // hadamard_matrix(n): [[1]] doubled as [[H, H], [H, -H]] in float32, divided by the float n ** 0.5.
  std::vector<float> h{1.0f};
  for (std::int64_t n = 1; n < size; n *= 2) {
    std::vector<float> next(static_cast<std::size_t>(4 * n * n));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const float v = h[static_cast<std::size_t>(i * n + j)];
        next[static_cast<std::size_t>(i * 2 * n + j)] = v;
        next[static_cast<std::size_t>(i * 2 * n + j + n)] = v;
        next[static_cast<std::size_t>((i + n) * 2 * n + j)] = v;
        next[static_cast<std::size_t>((i + n) * 2 * n + j + n)] = -v;
      }
    h = std::move(next);
  }
  const float root = static_cast<float>(std::sqrt(static_cast<double>(size)));
  for (auto& v : h) v = v / root;
  for (std::int64_t r = 0; r < x.rows; ++r)
    for (std::int64_t b = 0; b < x.cols; b += size)
      for (std::int64_t j = 0; j < size; ++j) {
        float acc = 0.0f;  // torch-CPU's fp32 matmul order: one fused multiply-add per term, i ascending
        for (std::int64_t i = 0; i < size; ++i) acc = std::fma(x.at(r, b + i), h[static_cast<std::size_t>(i * size + j)], acc);
        out[r * x.cols + b + j] = lp::round_to(x.type, acc + 0.0f);
      }
}

void lut_b(const input_view& w, std::uint8_t* packed, std::uint8_t* codebooks, std::uint8_t* scales) {
  const std::int64_t k_tiles = w.cols / lp::lut_cols;
  lp::lut_scratch scratch;
  float tile[lp::lut_elements];
  for (std::int64_t t = 0; t < w.rows / lp::lut_rows; ++t)
    for (std::int64_t j = 0; j < k_tiles; ++j) {
      for (int r = 0; r < lp::lut_rows; ++r)
        for (int k = 0; k < lp::lut_cols; ++k) tile[r * lp::lut_cols + k] = w.at(t * lp::lut_rows + r, j * lp::lut_cols + k);
      const std::int64_t at = t * k_tiles + j;
      scales[at] = lp::lut_b_tile(tile, scratch, packed + at * lp::lut_packed_bytes, codebooks + at * lp::lut_entries);
    }
}

void lut_b_dequantize(const std::uint8_t* packed, const std::uint8_t* codebooks, const std::uint8_t* scales, std::int64_t rows,
                      std::int64_t cols, float* out) {
  const std::int64_t k_tiles = cols / lp::lut_cols;
  for (std::int64_t n = 0; n < rows; ++n)
    for (std::int64_t k = 0; k < cols; ++k) {
      const std::int64_t tile = (n / lp::lut_rows) * k_tiles + k / lp::lut_cols;
      const int i = static_cast<int>((n % lp::lut_rows) * lp::lut_cols + k % lp::lut_cols);
      const std::uint32_t word = packed[tile * lp::lut_packed_bytes + (i / 8) * 3] |
                                 (static_cast<std::uint32_t>(packed[tile * lp::lut_packed_bytes + (i / 8) * 3 + 1]) << 8) |
                                 (static_cast<std::uint32_t>(packed[tile * lp::lut_packed_bytes + (i / 8) * 3 + 2]) << 16);
      const unsigned index = (word >> (3 * (i % 8))) & 7u;
      out[n * cols + k] = decode(codebooks[tile * lp::lut_entries + index]) * std::ldexp(1.0f, scales[tile] - 127);
    }
}

}  // namespace qpolicy::cpu::reference
