#include "qpolicy/kernels/cpu/weight_only_forward.hpp"

#include <stdexcept>
#include <utility>

#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/kernels/cpu/detail/rotation.hpp"
#include "qpolicy/numerics/detail/hadamard.hpp"
#include "decode_gemm.hpp"
#include "block_rows.hpp"

namespace qpolicy::cpu::detail {

using schemes::activation_treatment;
using schemes::formula;

template <formula F>
std::vector<float> decode_weights(const quantized_matrix& w, unsigned threads) {
  std::vector<float> out(static_cast<std::size_t>(w.rows * w.cols));
  if constexpr (F == formula::lut_b) {
    const std::int64_t k_tiles = w.cols / lp::lut_cols;
    detail::parallel_ranges(w.rows / lp::lut_rows, threads, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t t = first; t < last; ++t)
        for (std::int64_t j = 0; j < k_tiles; ++j) {
          const std::int64_t at = t * k_tiles + j;
          float* tile = out.data() + t * lp::lut_rows * w.cols + j * lp::lut_cols;
          lp::lut_decode_tile(w.codes.data() + at * lp::lut_packed_bytes, w.codebook.data() + at * lp::lut_entries,
                              w.block_scales[static_cast<std::size_t>(at)],
                              [&](int r, int k, float v) { tile[r * w.cols + k] = v; });
        }
    });
    return out;
  }
  detail::parallel_ranges(w.rows, threads, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t n = first; n < last; ++n)
      for (std::int64_t k = 0; k < w.cols; ++k)
        out[static_cast<std::size_t>(n * w.cols + k)] =
            lp::weight_operand<F>(w.codes.data(), w.block_scales.data(), w.cols, n, k, w.codebook.data());
  });
  return out;
}

namespace {
/// span(i0, i1) over elements [i0, i1) of a [rows, k] matrix, whole `width`-wide blocks, the rows split
/// over threads where blocks do not straddle rows.
template <class Span>
void each_span(std::int64_t rows, std::int64_t k, std::int64_t width, unsigned threads, Span&& span) {
  const bool whole_rows = k % width == 0;
  detail::parallel_ranges(whole_rows ? rows : 1, whole_rows ? threads : 1, [&](std::int64_t first, std::int64_t last) {
    span(static_cast<std::size_t>(first * k), static_cast<std::size_t>(whole_rows ? last * k : rows * k));
  });
}
}  // namespace

treated_activations treat_activations(activation_treatment t, const float* x, std::int64_t rows, std::int64_t k, unsigned threads,
                                      std::int64_t hadamard_size) {
  treated_activations a;
  const std::size_t n = static_cast<std::size_t>(rows * k);
  if (t == activation_treatment::none) {
    a.values.assign(x, x + n);
    return a;
  }
  if (schemes::rotates(t)) {
    // §A.3: every forward rotates x in the model dtype (bf16 here) before the wrapped method's treatment.
    scratch_vector<float> rotated(n);
    const detail::hadamard_table h(hadamard_size ? hadamard_size : 32);
    detail::parallel_ranges(rows, threads, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t r = first; r < last; ++r) detail::rotate_row(x + r * k, k, h, element::bf16, rotated.data() + r * k);
    });
    if (t == activation_treatment::rotated) {
      a.values = std::move(rotated);
      return a;
    }
    return treat_activations(activation_treatment::mxfp4_qdq, rotated.data(), rows, k, threads);
  }
  const input_view xv{x, element::f32, rows, k};
  if (t == activation_treatment::mxfp8_qdq) {
    // §B.5: the torch path's MXFP8 codes, dequantized in float32 (q * 2^(b - 127)) and rounded to bf16.
    scratch_vector<std::uint8_t> q(n), b(n / 32);
    block_quantizer<formulas::mxfp8_torch>::run(xv, {q.data(), b.data()}, {}, {threads});
    a.values.resize(n);
    const auto& e4m3 = e4m3_values();
    each_span(rows, k, 32, threads, [&](std::size_t i0, std::size_t i1) {
      const std::size_t done = rows::mxfp8_bf16_values_vectorized(q.data() + i0, b.data() + i0 / 32, i1 - i0, e4m3.data(), a.values.data() + i0);
      for (std::size_t i = i0 + done; i < i1; ++i) a.values[i] = lp::round_to(element::bf16, e4m3[q[i]] * lp::e8m0_value(b[i / 32]));
    });
    return a;
  }
  scratch_vector<std::uint8_t> codes(n / 2), scales(static_cast<std::size_t>(rows * (k / 16)));
  a.values.resize(n);
  if (t == activation_treatment::mxfp4_qdq) {
    // §4.3: the EVEN codes decoded and rounded to the model dtype (bf16 here), which is exact.
    block_quantizer<formulas::mxfp4_even>::run(xv, {codes.data(), scales.data()}, {}, {threads});
    each_span(rows, k, 32, threads, [&](std::size_t i0, std::size_t i1) {
      const std::size_t done = rows::mxfp4_bf16_values_vectorized(codes.data() + i0 / 2, scales.data() + i0 / 32, i1 - i0, a.values.data() + i0);
      for (std::size_t i = i0 + done; i < i1; ++i)
        a.values[i] = lp::round_to(element::bf16, lp::e2m1_value(i % 2 ? lp::e2m1_high(codes[i / 2]) : lp::e2m1_low(codes[i / 2])) *
                                                      lp::e8m0_value(scales[i / 32]));
    });
    return a;
  }
  // §6.3: codes and e4m3 block scales per token; the token scale multiplies the sum (§6.4). An all-zero
  // token has NaN block scales (0x7F) and zero codes: its operands are 0, as its exact product is.
  a.row_scale.resize(static_cast<std::size_t>(rows));
  block_quantizer<formulas::nvfp4_per_token>::run(xv, {codes.data(), scales.data(), a.row_scale.data()}, {}, {threads});
  each_span(rows, k, 16, threads, [&](std::size_t i0, std::size_t i1) {
    const std::size_t done = rows::nvfp4_token_values_vectorized(codes.data() + i0 / 2, scales.data() + i0 / 16, i1 - i0, a.values.data() + i0);
    for (std::size_t i = i0 + done; i < i1; ++i) {
      const std::uint8_t c = i % 2 ? lp::e2m1_high(codes[i / 2]) : lp::e2m1_low(codes[i / 2]);
      a.values[i] = (c & 7u) == 0 ? 0.0f : lp::e2m1_value(c) * fp8::decode(scales[i / 16]);
    }
  });
  return a;
}

namespace {

/// The outer scales after the sum, in a fixed order: token (NVFP4), row (INT8), tensor (NVFP4's
/// scale_2); then the bias.
void apply_outer_scales(float* out, std::int64_t rows, std::int64_t n, const float* a_scale, const float* w_scale, float tensor_scale,
                        const float* bias) {
  for (std::int64_t m = 0; m < rows; ++m)
    for (std::int64_t j = 0; j < n; ++j) {
      float v = out[m * n + j];
      if (a_scale) v *= a_scale[m];
      if (w_scale) v *= w_scale[j];
      v *= tensor_scale;
      if (bias) v += bias[j];
      out[m * n + j] = v;
    }
}

}  // namespace

template <formula F>
void weight_only_matmul(const treated_activations& a, std::int64_t rows, const quantized_matrix& w, const float* bias, float* out,
                        const forward_options& o) {
  const std::int64_t n = w.rows, k = w.cols;
  if (o.path == kernel_path::reference) {
    const auto wd = decode_weights<F>(w, 1);
    for (std::int64_t m = 0; m < rows; ++m)
      for (std::int64_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (std::int64_t t = 0; t < k; ++t) acc += a.values[static_cast<std::size_t>(m * k + t)] * wd[static_cast<std::size_t>(j * k + t)];
        out[m * n + j] = acc;
      }
  } else if (rows <= decode_batch_rows) {
    scratch_vector<std::uint16_t> bf16(a.values.size());
    const bool exact = has_bf16_dot_kernels() && exact_bf16(a.values.data(), rows * k, bf16.data());
    decode_gemm(formula_weights<F>{&w}, {a.values.data(), exact ? bf16.data() : nullptr, rows}, nullptr, out, o.threads);
  } else {
    gemm_panels(formula_weights<F>{&w}, a.values.data(), rows, out, o.threads);
  }
  apply_outer_scales(out, rows, n, a.row_scale.empty() ? nullptr : a.row_scale.data(),
                     F == formula::int8_per_channel ? w.row_scales.data() : nullptr, F == formula::nvfp4_weight ? w.tensor_scale : 1.0f, bias);
}

const void* weight_only_matmul_table() {
  return decoded_formula_table([](auto tag) { return &weight_only_matmul<decltype(tag)::id>; });
}
const void* decode_weights_table() {
  return decoded_formula_table([](auto tag) { return &decode_weights<decltype(tag)::id>; });
}

void check_weight_only_moe_sizes(const schemes::scheme_contract& c, std::int64_t hidden, std::int64_t inter) {
  const auto& f = schemes::formula_of(*schemes::formula_of_key(c.weight_key));
  if (f.tiled()) {  // quantize_lut_b's check, w13 [2I, H] first, then w2 [H, I]
    if (!schemes::takes_shape(f, 2 * inter, hidden)) throw std::invalid_argument(schemes::block_message(f, hidden, 2 * inter));
    if (!schemes::takes_shape(f, hidden, inter)) throw std::invalid_argument(schemes::block_message(f, inter, hidden));
    return;
  }
  if (c.moe_pads || c.moe_multiple <= 1) return;
  for (const std::int64_t size : {hidden, inter})
    if (size % c.moe_multiple != 0) throw std::invalid_argument(schemes::with_k(c.moe_message, size));
}

std::int64_t checked_hadamard_size(std::int64_t requested, std::int64_t k) {
  const std::int64_t size = requested ? requested : 32;
  if (!lp::is_hadamard_size(size)) throw std::invalid_argument("hadamard_size must be a power of two, got " + std::to_string(size));
  if (k % size != 0) throw std::invalid_argument(schemes::hadamard_size_message(k, size));
  return size;
}

void check_weight_only_linear_k(const schemes::formula_row& f, std::int64_t k) {
  if (k % f.k_multiple != 0) throw std::invalid_argument(schemes::block_message(f, k));
}

}  // namespace qpolicy::cpu::detail
