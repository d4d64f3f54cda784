#include "qpolicy/kernels/cpu/forward.hpp"

#include <cmath>
#include <stdexcept>

#include "qpolicy/kernels/cpu/detail/parallel.hpp"
#include "qpolicy/kernels/cpu/detail/row_ops.hpp"

namespace qpolicy::cpu {

using fp8::name_of;

std::string can_implement(weight_scales weights, activation_quant activation, std::int64_t in_features) {
  return schemes::pairing_sentence(weights, activation, in_features);
}

namespace detail {

void check_implementable(weight_scales weights, activation_quant act, std::int64_t in_features, const char* what) {
  if (auto why = can_implement(weights, act, in_features); !why.empty())
    throw std::invalid_argument(std::string(what) + ": " + why);
}

scratch_vector<float> widen_all(const input_view& x) {
  scratch_vector<float> out(static_cast<std::size_t>(x.size()));
  widen(x, 0, x.size(), out.data());
  return out;
}

void store_bf16(std::span<const float> from, std::uint16_t* out) {
  for (std::size_t i = 0; i < from.size(); ++i) out[i] = fp8::to_bf16(from[i]);
}

void add_bias(float* out, std::int64_t rows, std::int64_t n, const float* bias) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; ++j) out[r * n + j] += bias[j];
}

}  // namespace detail

namespace {

float round_bf16(float v) { return fp8::from_bf16(fp8::to_bf16(v)); }

/// x's elements as float32: the data itself when it is float32 already, else a widened copy in `keep`.
const float* as_f32(const input_view& x, detail::scratch_vector<float>& keep) {
  if (x.type == element::f32) return static_cast<const float*>(x.data);
  keep = detail::widen_all(x);
  return keep.data();
}

}  // namespace

void linear_forward_f32(const input_view& w, const float* bias, const input_view& x, float* out,
                        const forward_options& options) {
  if (x.cols != w.cols)
    throw std::invalid_argument("linear_forward_f32: the input has " + std::to_string(x.cols) +
                                " features per row, the weight " + std::to_string(w.cols));
  detail::scratch_vector<float> xk, wk;
  gemm_f32(as_f32(x, xk), as_f32(w, wk), x.rows, w.rows, w.cols, out, {options.threads});
  if (bias) detail::add_bias(out, x.rows, w.rows, bias);
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

namespace detail {

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

// Experts run in parallel (each single-threaded) when there are several: an expert gets few tokens,
// and starting threads inside each small GEMM would cost more than the GEMM.
void run_moe(std::int64_t experts, std::int64_t hidden, std::int64_t inter, std::int64_t hp, std::int64_t ip,
             const input_view& x, const routing& route, bool round_intermediates, unsigned threads,
             const expert_matmul& matmul, float* sum) {
  if (x.cols != hidden)
    throw std::invalid_argument("moe_forward: the input has " + std::to_string(x.cols) + " features per token, the experts take " +
                                std::to_string(hidden));
  const std::int64_t tokens = x.rows, slots = tokens * route.top_k;
  const auto plan = plan_routing(route, tokens, experts);
  auto keep = [&](float v) { return round_intermediates ? round_bf16(v) : v; };
  scratch_vector<float> y(static_cast<std::size_t>(slots * hidden));  // per row (slots grouped per expert)
  auto run_expert = [&](std::int64_t e, unsigned inner_threads) {
    const std::int64_t first = plan.first[static_cast<std::size_t>(e)], rows = plan.first[static_cast<std::size_t>(e) + 1] - first;
    if (rows == 0) return;
    scratch_vector<float> xin(static_cast<std::size_t>(rows * hp), 0.0f);  // columns past H stay zero (padded blocks)
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t t = plan.token_of_row[static_cast<std::size_t>(first + r)];
      for (std::int64_t c = 0; c < hidden; ++c) xin[static_cast<std::size_t>(r * hp + c)] = x.at(t, c);
    }
    scratch_vector<float> h13(static_cast<std::size_t>(rows * 2 * ip), 0.0f);
    matmul(e, 13, xin.data(), rows, h13.data(), inner_threads);
    scratch_vector<float> act(static_cast<std::size_t>(rows * ip), 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < inter; ++i) {
        const float g = keep(h13[static_cast<std::size_t>(r * 2 * ip + i)]);
        const float u = keep(h13[static_cast<std::size_t>(r * 2 * ip + ip + i)]);
        act[static_cast<std::size_t>(r * ip + i)] = keep(g / (1.0f + std::exp(-g)) * u);
      }
    scratch_vector<float> y2(static_cast<std::size_t>(rows * hp), 0.0f);
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

}  // namespace detail

void moe_forward_f32(const input_view& w13, const input_view& w2, std::int64_t experts, const input_view& x,
                     const routing& route, float* out, const forward_options& options) {
  const auto s = detail::check_moe_shape(w13, w2, experts);
  detail::scratch_vector<float> w13k, w2k;
  const float* w13f = as_f32(w13, w13k);
  const float* w2f = as_f32(w2, w2k);
  detail::run_moe(experts, s.hidden, s.inter, s.hidden, s.inter, x, route, false, options.threads,
          [&](std::int64_t e, int which, const float* in, std::int64_t rows, float* o, unsigned threads) {
            if (which == 13) gemm_f32(in, w13f + e * 2 * s.inter * s.hidden, rows, 2 * s.inter, s.hidden, o, {threads});
            else gemm_f32(in, w2f + e * s.hidden * s.inter, rows, s.hidden, s.inter, o, {threads});
          },
          out);
}

}  // namespace qpolicy::cpu
