#include "forward.hpp"

#include <cmath>
#include <stdexcept>

#include "vectorized.hpp"
#include "gemm_tiled.hpp"
#include "gemm_reference.hpp"
#include "parallel.hpp"
#include "reference.hpp"

namespace qpolicy::cpu {

using fp8::element;
using fp8::name_of;
using fp8::input_view;

activation_quant activation_of_key(key_id key) {
  if (const auto* a = schemes::find_activation(key)) return a->quant;
  std::string keys;
  for (const auto& a : schemes::activation_table) keys += (keys.empty() ? "" : ", ") + key_name(a.key);
  throw std::invalid_argument("activation key " + key_name(key) + " has no FP8 activation quantizer (" + keys + " have one)");
}

std::string can_implement(weight_scales weights, activation_quant activation, std::int64_t in_features) {
  return schemes::pairing_sentence(weights, activation, in_features);
}

namespace {

/// One [n, k] quantized matrix and its scales (an expert's, or a linear layer's).
struct weight_ref {
  weight_scales kind;
  const std::uint8_t* codes;
  const float* scales;
  std::int64_t n, k;
  const float* bias;
};

float round_bf16(float v) { return fp8::from_bf16(fp8::to_bf16(v)); }

/// out[rows, w.n] = quantize(x[rows, w.k]) times w (+ bias), float32 before the output rounding.
void quantized_matmul(const float* x, std::int64_t rows, const weight_ref& w, activation_quant act, float* out,
                      const forward_options& o) {
  if (rows == 0) return;
  const input_view xv{x, element::f32, rows, w.k};
  std::vector<std::uint8_t> q(static_cast<std::size_t>(rows * w.k));
  std::vector<float> sa;
  const bool fast = o.path == kernel_path::fast;
  const cpu_options co{o.threads};
  switch (act) {
    case activation_quant::per_tensor:
      sa.resize(1);
      if (fast) activation_kernel<fp8_per_tensor_dynamic>::run(xv, q.data(), sa.data(), co);
      else reference::dynamic_per_tensor(xv, q.data(), sa.data());
      break;
    case activation_quant::per_token:
      sa.resize(static_cast<std::size_t>(rows));
      if (fast) activation_kernel<fp8_per_token>::run(xv, q.data(), sa.data(), co);
      else reference::dynamic_per_token(xv, q.data(), sa.data());
      break;
    case activation_quant::group_128:
      sa.resize(static_cast<std::size_t>(rows * (w.k / 128)));
      if (fast) activation_kernel<fp8_per_block_dynamic>::run(xv, {}, q.data(), sa.data(), co);
      else reference::per_token_group(xv, {}, q.data(), sa.data());
      break;
  }
  const gemm_options go{o.threads};
  if (w.kind == weight_scales::block_128x128) {
    if (fast) gemm_blocked(q.data(), sa.data(), w.codes, w.scales, rows, w.n, w.k, out, w.bias, go);
    else reference::gemm_blocked(q.data(), sa.data(), w.codes, w.scales, rows, w.n, w.k, out);
  } else {
    const bool a_rows = act == activation_quant::per_token, w_rows = w.kind == weight_scales::per_channel;
    if (fast) gemm_scaled(q.data(), sa.data(), a_rows, w.codes, w.scales, w_rows, rows, w.n, w.k, out, w.bias, go);
    else reference::gemm_scaled(q.data(), sa.data(), a_rows, w.codes, w.scales, w_rows, rows, w.n, w.k, out);
  }
  if (!fast && w.bias)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < w.n; ++j) out[r * w.n + j] += w.bias[j];
}

std::vector<float> widen_all(const input_view& x) {
  std::vector<float> out(static_cast<std::size_t>(x.size()));
  for (std::int64_t i = 0; i < x.size(); ++i) out[static_cast<std::size_t>(i)] = x.at(i);
  return out;
}

/// x's elements as float32: the data itself when it is float32 already, else a widened copy in `keep`.
const float* as_f32(const input_view& x, std::vector<float>& keep) {
  if (x.type == element::f32) return static_cast<const float*>(x.data);
  keep = widen_all(x);
  return keep.data();
}

void check_implementable(weight_scales weights, activation_quant act, std::int64_t in_features, const char* what) {
  if (auto why = can_implement(weights, act, in_features); !why.empty())
    throw std::invalid_argument(std::string(what) + ": " + why);
}

}  // namespace

fp8_linear quantize_linear(weight_scales weights, activation_quant activation, const input_view& w, const float* bias,
                           const forward_options& options) {
  check_implementable(weights, activation, w.cols, "linear layer");
  fp8_linear l;
  l.weights = weights;
  l.activation = activation;
  l.out_features = w.rows;
  l.in_features = w.cols;
  l.codes.resize(static_cast<std::size_t>(w.size()));
  const cpu_options co{options.threads};
  switch (weights) {
    case weight_scales::per_tensor:
      l.scales.resize(1);
      weight_kernel<fp8_per_tensor>::run(w, l.codes.data(), l.scales.data(), co);
      break;
    case weight_scales::per_channel:
      l.scales.resize(static_cast<std::size_t>(w.rows));
      weight_kernel<fp8_per_channel>::run(w, l.codes.data(), l.scales.data(), co);
      break;
    case weight_scales::block_128x128:
      l.scales.resize(static_cast<std::size_t>(((w.rows + 127) / 128) * ((w.cols + 127) / 128)));
      weight_kernel<fp8_per_block>::run(w, {}, l.codes.data(), l.scales.data(), co);
      break;
  }
  if (bias) l.bias.assign(bias, bias + w.rows);
  return l;
}

void linear_forward(const fp8_linear& layer, const input_view& x, std::uint16_t* out, const forward_options& options) {
  if (x.cols != layer.in_features)
    throw std::invalid_argument("linear_forward: the input has " + std::to_string(x.cols) +
                                " features per row, the layer takes " + std::to_string(layer.in_features));
  check_implementable(layer.weights, layer.activation, layer.in_features, "linear_forward");
  const auto xf = widen_all(x);
  std::vector<float> y(static_cast<std::size_t>(x.rows * layer.out_features));
  quantized_matmul(xf.data(), x.rows,
                   {layer.weights, layer.codes.data(), layer.scales.data(), layer.out_features, layer.in_features,
                    layer.bias.empty() ? nullptr : layer.bias.data()},
                   layer.activation, y.data(), options);
  for (std::size_t i = 0; i < y.size(); ++i) out[i] = fp8::to_bf16(y[i]);
}

void linear_forward_f32(const input_view& w, const float* bias, const input_view& x, float* out,
                        const forward_options& options) {
  if (x.cols != w.cols)
    throw std::invalid_argument("linear_forward_f32: the input has " + std::to_string(x.cols) +
                                " features per row, the weight " + std::to_string(w.cols));
  std::vector<float> xk, wk;
  gemm_f32(as_f32(x, xk), as_f32(w, wk), x.rows, w.rows, w.cols, out, {options.threads});
  if (bias)
    for (std::int64_t r = 0; r < x.rows; ++r)
      for (std::int64_t j = 0; j < w.rows; ++j) out[r * w.rows + j] += bias[j];
}

routing_plan plan_routing(const routing& route, std::int64_t tokens, std::int64_t experts) {
  if (route.top_k <= 0 || !route.ids || !route.weights)
    throw std::invalid_argument("moe_forward: routing needs top_k > 0, expert ids and weights");
  const std::int64_t slots = tokens * route.top_k;
  routing_plan p;
  p.first.assign(static_cast<std::size_t>(experts) + 1, 0);
  for (std::int64_t s = 0; s < slots; ++s) {
    const auto e = route.ids[s];
    if (e < 0 || e >= experts)
      throw std::invalid_argument("moe_forward: token " + std::to_string(s / route.top_k) + " is routed to expert " +
                                  std::to_string(e) + ", but the layer has experts 0.." + std::to_string(experts - 1));
    ++p.first[static_cast<std::size_t>(e) + 1];
  }
  for (std::int64_t e = 0; e < experts; ++e) p.first[static_cast<std::size_t>(e) + 1] += p.first[static_cast<std::size_t>(e)];
  std::vector<std::int64_t> next(p.first.begin(), p.first.end() - 1);
  p.token_of_row.resize(static_cast<std::size_t>(slots));
  p.row_of_slot.resize(static_cast<std::size_t>(slots));
  for (std::int64_t s = 0; s < slots; ++s) {
    const auto row = next[static_cast<std::size_t>(route.ids[s])]++;
    p.token_of_row[static_cast<std::size_t>(row)] = s / route.top_k;
    p.row_of_slot[static_cast<std::size_t>(s)] = row;
  }
  return p;
}

namespace {

struct moe_shape {
  std::int64_t experts, hidden, inter;
};

moe_shape check_moe_shape(const input_view& w13, const input_view& w2, std::int64_t experts) {
  if (experts <= 0) throw std::invalid_argument("MoE: the expert count must be positive, got " + std::to_string(experts));
  if (w13.rows % (2 * experts) != 0)
    throw std::invalid_argument("MoE: w13 has " + std::to_string(w13.rows) + " rows, not a multiple of 2 x " +
                                std::to_string(experts) + " experts");
  const moe_shape s{experts, w13.cols, w13.rows / (2 * experts)};
  if (w2.rows != experts * s.hidden || w2.cols != s.inter)
    throw std::invalid_argument("MoE: w2 is [" + std::to_string(w2.rows) + ", " + std::to_string(w2.cols) +
                                "], expected [E * H, I] = [" + std::to_string(experts * s.hidden) + ", " +
                                std::to_string(s.inter) + "]");
  return s;
}

/// The MoE pass shared by the quantized and the float32 versions: routing, per-expert w13, SiLU-and-mul,
/// w2, and the weighted sum per token. `matmul(e, which, x, rows, out, threads)` multiplies by expert
/// e's w13 (which == 13: [rows, hp] -> [rows, 2 ip]) or w2 ([rows, ip] -> [rows, hp]). Experts run in
/// parallel (each single-threaded) when there are several: an expert gets few tokens, and starting
/// threads inside each small GEMM would cost more than the GEMM.
template <class Matmul>
void run_moe(std::int64_t experts, std::int64_t hidden, std::int64_t inter, std::int64_t hp, std::int64_t ip,
             const input_view& x, const routing& route, bool round_intermediates, unsigned threads, Matmul&& matmul,
             float* sum) {
  if (x.cols != hidden)
    throw std::invalid_argument("moe_forward: the input has " + std::to_string(x.cols) + " features per token, the experts take " +
                                std::to_string(hidden));
  const std::int64_t tokens = x.rows, slots = tokens * route.top_k;
  const auto plan = plan_routing(route, tokens, experts);
  auto keep = [&](float v) { return round_intermediates ? round_bf16(v) : v; };
  std::vector<float> y(static_cast<std::size_t>(slots * hidden));  // per row (slots grouped per expert)
  auto run_expert = [&](std::int64_t e, unsigned inner_threads) {
    const std::int64_t first = plan.first[static_cast<std::size_t>(e)], rows = plan.first[static_cast<std::size_t>(e) + 1] - first;
    if (rows == 0) return;
    std::vector<float> xin(static_cast<std::size_t>(rows * hp), 0.0f);  // columns past H stay zero (padded blocks)
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t t = plan.token_of_row[static_cast<std::size_t>(first + r)];
      for (std::int64_t c = 0; c < hidden; ++c) xin[static_cast<std::size_t>(r * hp + c)] = x.at(t, c);
    }
    std::vector<float> h13(static_cast<std::size_t>(rows * 2 * ip), 0.0f);
    matmul(e, 13, xin.data(), rows, h13.data(), inner_threads);
    std::vector<float> act(static_cast<std::size_t>(rows * ip), 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < inter; ++i) {
        const float g = keep(h13[static_cast<std::size_t>(r * 2 * ip + i)]);
        const float u = keep(h13[static_cast<std::size_t>(r * 2 * ip + ip + i)]);
        act[static_cast<std::size_t>(r * ip + i)] = keep(g / (1.0f + std::exp(-g)) * u);
      }
    std::vector<float> y2(static_cast<std::size_t>(rows * hp), 0.0f);
    matmul(e, 2, act.data(), rows, y2.data(), inner_threads);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < hidden; ++c)
        y[static_cast<std::size_t>((first + r) * hidden + c)] = keep(y2[static_cast<std::size_t>(r * hp + c)]);
  };
  std::int64_t busy = 0;
  for (std::int64_t e = 0; e < experts; ++e) busy += plan.first[static_cast<std::size_t>(e) + 1] > plan.first[static_cast<std::size_t>(e)];
  if (detail::thread_count(threads, busy) <= 1) {
    for (std::int64_t e = 0; e < experts; ++e) run_expert(e, threads);
  } else {
    // Threads take contiguous ranges of rows; an expert belongs to the range holding its first row.
    detail::parallel_ranges(slots, threads, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t e = 0; e < experts; ++e) {
        const std::int64_t first = plan.first[static_cast<std::size_t>(e)];
        if (first >= lo && first < hi) run_expert(e, 1);
      }
    });
  }
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t c = 0; c < hidden; ++c) {
      float v = 0.0f;
      for (std::int64_t j = 0; j < route.top_k; ++j) {
        const std::int64_t row = plan.row_of_slot[static_cast<std::size_t>(t * route.top_k + j)];
        v += route.weights[t * route.top_k + j] * y[static_cast<std::size_t>(row * hidden + c)];
      }
      sum[t * hidden + c] = v;
    }
}

}  // namespace

fp8_moe quantize_moe(weight_scales weights, activation_quant activation, const input_view& w13, const input_view& w2,
                     std::int64_t experts, const forward_options& options) {
  const auto s = check_moe_shape(w13, w2, experts);
  fp8_moe m;
  m.weights = weights;
  m.activation = activation;
  m.experts = experts;
  m.hidden = s.hidden;
  m.intermediate = s.inter;
  const bool blocked = weights == weight_scales::block_128x128;
  m.hidden_padded = blocked ? (s.hidden + 127) / 128 * 128 : s.hidden;
  m.intermediate_padded = blocked ? (s.inter + 127) / 128 * 128 : s.inter;
  check_implementable(weights, activation, m.hidden_padded, "MoE w13");
  check_implementable(weights, activation, m.intermediate_padded, "MoE w2");
  const std::int64_t hp = m.hidden_padded, ip = m.intermediate_padded;
  m.w13.resize(static_cast<std::size_t>(experts * 2 * ip * hp));
  m.w2.resize(static_cast<std::size_t>(experts * hp * ip));
  const cpu_options co{options.threads};
  switch (weights) {
    case weight_scales::per_tensor:  // spec §9: each expert's matrix its own scale
      m.s13.resize(static_cast<std::size_t>(experts));
      m.s2.resize(static_cast<std::size_t>(experts));
      for (std::int64_t e = 0; e < experts; ++e) {
        weight_kernel<fp8_per_tensor>::run(w13.rows_from(e * 2 * s.inter, 2 * s.inter), m.w13.data() + e * 2 * ip * hp,
                                           m.s13.data() + e, co);
        weight_kernel<fp8_per_tensor>::run(w2.rows_from(e * s.hidden, s.hidden), m.w2.data() + e * hp * ip,
                                           m.s2.data() + e, co);
      }
      break;
    case weight_scales::per_channel:  // spec §9: w13 rows by the per-token rule, w2 rows by §6
      m.s13.resize(static_cast<std::size_t>(experts * 2 * s.inter));
      m.s2.resize(static_cast<std::size_t>(experts * s.hidden));
      activation_kernel<fp8_per_token>::run(w13, m.w13.data(), m.s13.data(), co);
      weight_kernel<fp8_per_channel>::run(w2, m.w2.data(), m.s2.data(), co);
      break;
    case weight_scales::block_128x128: {
      // Spec §9: each expert's matrices zero-padded to 128, then blocked by the fast kernel
      // (bit-identical to reference::moe_per_block).
      m.s13.resize(static_cast<std::size_t>(experts * (2 * ip / 128) * (hp / 128)));
      m.s2.resize(static_cast<std::size_t>(experts * (hp / 128) * (ip / 128)));
      std::vector<float> pad13(static_cast<std::size_t>(2 * ip * hp)), pad2(static_cast<std::size_t>(hp * ip));
      for (std::int64_t e = 0; e < experts; ++e) {
        reference::moe_pad_expert(w13, w2, e, s.inter, s.hidden, pad13.data(), pad2.data());
        weight_kernel<fp8_per_block>::run({pad13.data(), element::f32, 2 * ip, hp}, {}, m.w13.data() + e * 2 * ip * hp,
                                          m.s13.data() + e * (2 * ip / 128) * (hp / 128), co);
        weight_kernel<fp8_per_block>::run({pad2.data(), element::f32, hp, ip}, {}, m.w2.data() + e * hp * ip,
                                          m.s2.data() + e * (hp / 128) * (ip / 128), co);
      }
      break;
    }
  }
  return m;
}

void moe_forward(const fp8_moe& layer, const input_view& x, const routing& route, std::uint16_t* out,
                 const forward_options& options) {
  const std::int64_t hp = layer.hidden_padded, ip = layer.intermediate_padded;
  check_implementable(layer.weights, layer.activation, hp, "moe_forward w13");
  check_implementable(layer.weights, layer.activation, ip, "moe_forward w2");
  const bool blocked = layer.weights == weight_scales::block_128x128;
  // Scales per expert: one, one per row, or the expert's block grid.
  const std::int64_t s13_step = blocked ? (2 * ip / 128) * (hp / 128) : layer.weights == weight_scales::per_channel ? 2 * ip : 1;
  const std::int64_t s2_step = blocked ? (hp / 128) * (ip / 128) : layer.weights == weight_scales::per_channel ? hp : 1;
  std::vector<float> sum(static_cast<std::size_t>(x.rows * layer.hidden));
  run_moe(layer.experts, layer.hidden, layer.intermediate, hp, ip, x, route, true, options.threads,
          [&](std::int64_t e, int which, const float* in, std::int64_t rows, float* o, unsigned threads) {
            forward_options inner = options;
            inner.threads = threads;
            const weight_ref w = which == 13 ? weight_ref{layer.weights, layer.w13.data() + e * 2 * ip * hp,
                                                          layer.s13.data() + e * s13_step, 2 * ip, hp, nullptr}
                                             : weight_ref{layer.weights, layer.w2.data() + e * hp * ip,
                                                          layer.s2.data() + e * s2_step, hp, ip, nullptr};
            quantized_matmul(in, rows, w, layer.activation, o, inner);
          },
          sum.data());
  for (std::size_t i = 0; i < sum.size(); ++i) out[i] = fp8::to_bf16(sum[i]);
}

void moe_forward_f32(const input_view& w13, const input_view& w2, std::int64_t experts, const input_view& x,
                     const routing& route, float* out, const forward_options& options) {
  const auto s = check_moe_shape(w13, w2, experts);
  std::vector<float> w13k, w2k;
  const float* w13f = as_f32(w13, w13k);
  const float* w2f = as_f32(w2, w2k);
  run_moe(experts, s.hidden, s.inter, s.hidden, s.inter, x, route, false, options.threads,
          [&](std::int64_t e, int which, const float* in, std::int64_t rows, float* o, unsigned threads) {
            if (which == 13) gemm_f32(in, w13f + e * 2 * s.inter * s.hidden, rows, 2 * s.inter, s.hidden, o, {threads});
            else gemm_f32(in, w2f + e * s.hidden * s.inter, rows, s.hidden, s.inter, o, {threads});
          },
          out);
}

}  // namespace qpolicy::cpu
