#include "qpolicy/kernels/cpu/reference.hpp"

#include <algorithm>
#include <vector>

namespace qpolicy::cpu::reference {

using namespace fp8;

float amax_propagating(const input_view& x) {
  float a = 0.0f;
  for (std::int64_t i = 0; i < x.size(); ++i) a = max_nan(a, abs_f32(x.at(i)));
  return a;
}

namespace {
float amax_ignoring_nan(const input_view& x, std::int64_t first, std::int64_t count) {
  float a = 0.0f;
  for (std::int64_t i = first; i < first + count; ++i) a = max_num(a, abs_f32(x.at(i)));
  return a;
}
}  // namespace

void weight_per_tensor_with_amax(const input_view& w, float amax, std::uint8_t* q, float* scale) {
  const float s = amax / max_e4m3;
  const float inv = 1.0f / s;
  for (std::int64_t i = 0; i < w.size(); ++i) q[i] = sat(clamp_s(w.at(i) * inv));
  scale[0] = s;
}

void weight_per_tensor(const input_view& w, std::uint8_t* q, float* scale) {
  weight_per_tensor_with_amax(w, amax_propagating(w), q, scale);
}

void dynamic_per_tensor(const input_view& x, std::uint8_t* q, float* scale) {
  const float s = amax_ignoring_nan(x, 0, x.size()) / max_e4m3;
  const float inv = 1.0f / s;
  for (std::int64_t i = 0; i < x.size(); ++i) q[i] = sat(clamp_s(x.at(i) * inv));
  scale[0] = s;
}

void dynamic_per_token(const input_view& x, std::uint8_t* q, float* scales) {
  for (std::int64_t r = 0; r < x.rows; ++r) {
    const float s = max_num(amax_ignoring_nan(x, r * x.cols, x.cols) / max_e4m3, min_scale_factor());
    for (std::int64_t c = 0; c < x.cols; ++c) q[r * x.cols + c] = sat(clamp_s(x.at(r, c) / s));
    scales[r] = s;
  }
}

void weight_per_channel(const input_view& w, std::uint8_t* q, float* scales) {
  for (std::int64_t r = 0; r < w.rows; ++r) {
    float a = 0.0f;
    for (std::int64_t c = 0; c < w.cols; ++c) a = max_nan(a, abs_f32(w.at(r, c)));
    const float s = max_nan(a / max_e4m3, min_scale_factor());
    for (std::int64_t c = 0; c < w.cols; ++c) q[r * w.cols + c] = tcvt(clamp_t(w.at(r, c) / s));
    scales[r] = s;
  }
}

void per_token_group(const input_view& x, const group_options& o, std::uint8_t* q, float* scales) {
  const std::int64_t groups = x.cols / o.group_size;
  if (o.layout == scale_layout::column_major_tma)
    for (std::int64_t i = 0; i < scale_storage(o.layout, x.rows, groups); ++i) scales[i] = 0.0f;
  for (std::int64_t m = 0; m < x.rows; ++m)
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t first = m * x.cols + g * o.group_size;
      const float a = max_num(group_eps(), amax_ignoring_nan(x, first, o.group_size));
      float y = a / max_e4m3;
      if (o.ue8m0) y = ue8m0(max_num(abs_f32(y), group_eps()));
      for (std::int64_t k = 0; k < o.group_size; ++k) q[first + k] = tcvt(clamp_g(x.at(first + k) / y));
      scales[scale_offset(o.layout, x.rows, groups, m, g)] = y;
    }
}

void block_128x128(const input_view& w, const block_options& o, std::uint8_t* q, float* scales) {
  const std::int64_t row_blocks = (w.rows + 127) / 128, col_blocks = (w.cols + 127) / 128;
  for (std::int64_t bi = 0; bi < row_blocks; ++bi)
    for (std::int64_t bj = 0; bj < col_blocks; ++bj) {
      const std::int64_t r0 = bi * 128, c0 = bj * 128;
      const std::int64_t r1 = r0 + 128 < w.rows ? r0 + 128 : w.rows, c1 = c0 + 128 < w.cols ? c0 + 128 : w.cols;
      // Padding zeros count toward the block: they never raise |x|, and the floor covers an empty one.
      float a = 0.0f;
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) a = max_nan(a, abs_f32(w.at(r, c)));
      a = max_nan(a, block_floor());
      float sf = o.compiled_variant ? a * float_of(inv_448_bits) : a / max_e4m3;
      if (o.ue8m0) sf = ue8m0(sf);
      const float inv = 1.0f / sf;
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) q[r * w.cols + c] = tcvt(w.at(r, c) * inv);
      scales[bi * col_blocks + bj] = sf;
    }
}

void moe_per_tensor(const input_view& w13, const input_view& w2, std::int64_t experts, std::uint8_t* q13, float* s13,
                    std::uint8_t* q2, float* s2) {
  const std::int64_t rows13 = w13.rows / experts, rows2 = w2.rows / experts;
  for (std::int64_t e = 0; e < experts; ++e) {
    weight_per_tensor(w13.rows_from(e * rows13, rows13), q13 + e * rows13 * w13.cols, s13 + e);
    weight_per_tensor(w2.rows_from(e * rows2, rows2), q2 + e * rows2 * w2.cols, s2 + e);
  }
}

void moe_pad_expert(const input_view& w13, const input_view& w2, std::int64_t e, std::int64_t inter, std::int64_t hidden,
                    float* pad13, float* pad2, std::int64_t multiple) {
  const std::int64_t hp = (hidden + multiple - 1) / multiple * multiple, ip = (inter + multiple - 1) / multiple * multiple;
  std::fill(pad13, pad13 + 2 * ip * hp, 0.0f);
  std::fill(pad2, pad2 + hp * ip, 0.0f);
  const input_view x13 = w13.rows_from(e * 2 * inter, 2 * inter), x2 = w2.rows_from(e * hidden, hidden);
  for (std::int64_t r = 0; r < inter; ++r)
    for (std::int64_t c = 0; c < hidden; ++c) {
      pad13[r * hp + c] = x13.at(r, c);                 // gate
      pad13[(ip + r) * hp + c] = x13.at(inter + r, c);  // up
    }
  for (std::int64_t r = 0; r < hidden; ++r)
    for (std::int64_t c = 0; c < inter; ++c) pad2[r * ip + c] = x2.at(r, c);
}

void moe_per_block(const input_view& w13, const input_view& w2, std::int64_t experts, const block_options& o,
                   std::uint8_t* q13, float* s13, std::uint8_t* q2, float* s2) {
  const std::int64_t hidden = w13.cols, inter = w13.rows / experts / 2;
  const std::int64_t hp = (hidden + 127) / 128 * 128, ip = (inter + 127) / 128 * 128;
  std::vector<float> pad13(static_cast<std::size_t>(2 * ip * hp)), pad2(static_cast<std::size_t>(hp * ip));
  for (std::int64_t e = 0; e < experts; ++e) {
    moe_pad_expert(w13, w2, e, inter, hidden, pad13.data(), pad2.data());
    block_128x128({pad13.data(), element::f32, 2 * ip, hp}, o, q13 + e * 2 * ip * hp, s13 + e * (2 * ip / 128) * (hp / 128));
    block_128x128({pad2.data(), element::f32, hp, ip}, o, q2 + e * hp * ip, s2 + e * (hp / 128) * (ip / 128));
  }
}

}  // namespace qpolicy::cpu::reference
