// Forward passes on the GPU: activation quantization, GEMMs through the gemm_runner, and the small
// kernels of a MoE layer (gather, SiLU-and-mul, weighted combine) around its expert GEMMs (one grouped
// launch per projection, or the per-expert loop). Thin __global__ functions over the
// shared arithmetic; the MoE routing is planned on the host as in the CPU pass.
#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "qpolicy/kernels/cuda/detail/cuda_check.hpp"
#include "qpolicy/kernels/cuda/forward.hpp"
#include "qpolicy/kernels/cuda/device_info.hpp"
#include "qpolicy/kernels/cuda/grouped_gemm.hpp"

namespace qpolicy::cuda {

namespace {

using detail::check;
using detail::stream_of;

/// A row-major [rows, k_blocks] block-scale grid with `stride` scales per row (cuBLASLt's padding).
std::vector<float> restride(const float* s, std::int64_t rows, std::int64_t k_blocks, std::int64_t stride) {
  std::vector<float> out(static_cast<std::size_t>(rows * stride), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < k_blocks; ++g) out[static_cast<std::size_t>(r * stride + g)] = s[r * k_blocks + g];
  return out;
}

__global__ void gather_rows(const std::uint16_t* x, std::int64_t hidden, std::int64_t padded, const std::int64_t* token_of_row,
                            std::int64_t rows, std::uint16_t* out) {
  const std::int64_t r = blockIdx.y;
  if (r >= rows) return;
  const std::int64_t t = token_of_row[r];
  for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; c < padded;
       c += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[r * padded + c] = c < hidden ? x[t * hidden + c] : std::uint16_t{0};
}

// act[r, i] = bf16(silu(gate) * up), gate at [0, I), up at [Ip, Ip + I) of the bf16 w13 output;
// columns past I are zero (padded blocks).
__global__ void silu_and_mul(const std::uint16_t* h13, std::int64_t rows, std::int64_t inter, std::int64_t padded,
                             std::uint16_t* act) {
  const std::int64_t r = blockIdx.y;
  if (r >= rows) return;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < padded;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint16_t v = 0;
    if (i < inter) {
      const float g = fp8::from_bf16(h13[r * 2 * padded + i]), u = fp8::from_bf16(h13[r * 2 * padded + padded + i]);
      v = fp8::to_bf16(__fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u));
    }
    act[r * padded + i] = v;
  }
}

// out[t, c] = bf16(sum over j in top-k order of weight[t, j] * y[row of slot (t, j), c]).
__global__ void combine(const std::uint16_t* y, std::int64_t padded, const std::int64_t* row_of_slot, const float* weights,
                        std::int64_t top_k, std::int64_t tokens, std::int64_t hidden, std::uint16_t* out) {
  const std::int64_t t = blockIdx.y;
  if (t >= tokens) return;
  for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; c < hidden;
       c += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float v = 0.0f;
    for (std::int64_t j = 0; j < top_k; ++j)
      v = __fadd_rn(v, __fmul_rn(weights[t * top_k + j], fp8::from_bf16(y[row_of_slot[t * top_k + j] * padded + c])));
    out[t * hidden + c] = fp8::to_bf16(v);
  }
}

dim3 row_grid(std::int64_t cols, std::int64_t rows) {
  return dim3(static_cast<unsigned>((cols + 255) / 256 < 64 ? (cols + 255) / 256 : 64), static_cast<unsigned>(rows));
}

}  // namespace

namespace detail {

std::int64_t upload_linear(const std::vector<std::uint8_t>& codes, const std::vector<float>& scales,
                           const std::vector<float>& bias, bool blocks, std::int64_t out_features, std::int64_t in_features,
                           device_memory& d_codes, device_memory& d_scales, device_memory& d_bias) {
  d_codes = to_device(codes.data(), codes.size());
  std::int64_t stride = 0;
  if (blocks) {
    stride = fp8::cublaslt_block_scale_stride(in_features);
    const auto k_blocks = in_features / schemes::block_k;
    const auto s = restride(scales.data(), (out_features + schemes::block_k - 1) / schemes::block_k, k_blocks, stride);
    d_scales = to_device(s.data(), s.size() * sizeof(float));
  } else {
    d_scales = to_device(scales.data(), scales.size() * sizeof(float));
  }
  if (!bias.empty()) {
    std::vector<std::uint16_t> b(bias.size());
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = fp8::to_bf16(bias[i]);
    d_bias = to_device(b.data(), b.size() * sizeof(std::uint16_t));
  }
  return stride;
}

void upload_experts(const std::vector<std::uint8_t>& w13, const std::vector<std::uint8_t>& w2, const std::vector<float>& s13,
                    const std::vector<float>& s2, bool blocks, device_experts& d) {
  const std::int64_t hp = d.hidden_padded, ip = d.intermediate_padded, bk = schemes::block_k;
  d.w13 = to_device(w13.data(), w13.size());
  d.w2 = to_device(w2.data(), w2.size());
  if (!blocks) {
    d.s13 = to_device(s13.data(), s13.size() * sizeof(float));
    d.s2 = to_device(s2.data(), s2.size() * sizeof(float));
    return;
  }
  d.s13_stride = fp8::cublaslt_block_scale_stride(hp);
  d.s2_stride = fp8::cublaslt_block_scale_stride(ip);
  d.s13_step = (2 * ip / bk) * d.s13_stride;
  d.s2_step = (hp / bk) * d.s2_stride;
  // Each expert's grid restrided on its own: E grids of [2Ip/128, Hp/128] and [Hp/128, Ip/128].
  const auto r13 = restride(s13.data(), d.experts * (2 * ip / bk), hp / bk, d.s13_stride);
  const auto r2 = restride(s2.data(), d.experts * (hp / bk), ip / bk, d.s2_stride);
  d.s13 = to_device(r13.data(), r13.size() * sizeof(float));
  d.s2 = to_device(r2.data(), r2.size() * sizeof(float));
}

}  // namespace detail

namespace {

/// Host arrays packed into one upload, each section 16-byte aligned.
class upload_pack {
 public:
  /// Appends `count` elements; returns the section's byte offset.
  template <class T>
  std::size_t add(const T* data, std::size_t count) {
    const std::size_t at = (bytes_.size() + 15) / 16 * 16;
    bytes_.resize(at + count * sizeof(T));
    if (count) std::memcpy(bytes_.data() + at, data, count * sizeof(T));
    return at;
  }
  /// Copies the pack into `d` (grown as needed) in stream order.
  void upload(device_memory& d, const launch_options& o) const {
    d.reserve(bytes_.size());
    if (!bytes_.empty())
      check(cudaMemcpyAsync(d.get(), bytes_.data(), bytes_.size(), cudaMemcpyHostToDevice, stream_of(o)), "cudaMemcpyAsync (routing)", o);
  }

 private:
  std::vector<unsigned char> bytes_;
};

template <class T>
const T* at(const device_memory& d, std::size_t offset) {
  return reinterpret_cast<const T*>(static_cast<const unsigned char*>(d.get()) + offset);
}

/// The grouped GEMM of one MoE projection: weights `w` with scales (step per expert, block row stride).
fp8::grouped::problem grouped_problem(fp8::weight_scales weights, fp8::activation_quant activation, const std::uint8_t* a, const float* a_scale, const device_memory& w,
                                      const device_memory& scales, std::int64_t step, std::int64_t stride, std::int64_t n,
                                      std::int64_t k, std::uint16_t* out) {
  return {a, w.as<std::uint8_t>(), a_scale, scales.as<float>(), step, stride, out, n, k, activation, weights};
}

/// Why the grouped kernel cannot run this layer now, or empty.
std::string grouped_refusal(const forward_context& ctx, const device_experts& m, fp8::weight_scales weights,
                            fp8::activation_quant activation) {
  if (ctx.moe == moe_kernel::loop) return "the context asks for the per-expert loop";
  if (ctx.prefer == gemm_backend::fallback) return "the bit-exact fallback GEMM runs per expert";
  const int sm = current_sm();
  const std::int64_t hp = m.hidden_padded, ip = m.intermediate_padded;
  fp8::grouped::problem p{nullptr, nullptr, nullptr, nullptr, 0, 0, nullptr, 2 * ip, hp, activation, weights};
  if (auto why = grouped_can_implement(p, sm); !why.empty()) return "w13: " + why;
  p.n = hp;
  p.k = ip;
  if (auto why = grouped_can_implement(p, sm); !why.empty()) return "w2: " + why;
  return {};
}

}  // namespace

namespace detail {

void moe_pipeline(forward_context& ctx, const moe_dims& m, const std::uint16_t* x, std::int64_t tokens, const cpu::routing& route,
                  std::uint16_t* out, const moe_projection& project) {
  const std::int64_t hp = m.hidden_padded, ip = m.intermediate_padded, experts = m.experts;
  const auto plan = cpu::plan_routing(route, tokens, experts);  // on the host, as on the CPU
  const std::int64_t slots = tokens * route.top_k;
  if (tokens == 0) return;  // no rows: no launches
  const auto& count = plan.first;
  const auto& o = ctx.launch;
  const auto stream = stream_of(o);
  const auto tiles = fp8::grouped::make_tiles(count.data(), experts);
  upload_pack pack;
  const std::size_t rows_at = pack.add(plan.token_of_row.data(), plan.token_of_row.size());
  const std::size_t slots_at = pack.add(plan.row_of_slot.data(), plan.row_of_slot.size());
  const std::size_t weights_at = pack.add(route.weights, static_cast<std::size_t>(slots));
  const std::size_t offsets_at = pack.add(count.data(), count.size());
  const std::size_t tiles_at = pack.add(tiles.data(), tiles.size());
  pack.upload(ctx.routing, o);
  const moe_rows rows{count, at<std::int64_t>(ctx.routing, offsets_at), at<fp8::grouped::tile>(ctx.routing, tiles_at),
                      static_cast<std::int64_t>(tiles.size()), slots};
  ctx.gathered.reserve(static_cast<std::size_t>(slots * hp) * 2);
  ctx.h13.reserve(static_cast<std::size_t>(slots * 2 * ip) * 2);
  ctx.act.reserve(static_cast<std::size_t>(slots * ip) * 2);
  ctx.y2.reserve(static_cast<std::size_t>(slots * hp) * 2);
  auto* xin = ctx.gathered.as<std::uint16_t>();
  auto* h13 = ctx.h13.as<std::uint16_t>();
  auto* act = ctx.act.as<std::uint16_t>();
  auto* y2 = ctx.y2.as<std::uint16_t>();
  gather_rows<<<row_grid(hp, slots), 256, 0, stream>>>(x, m.hidden, hp, at<std::int64_t>(ctx.routing, rows_at), slots, xin);
  check(cudaGetLastError(), "gather_rows", o);
  project(xin, hp, 13, 2 * ip, h13, rows);
  silu_and_mul<<<row_grid(ip, slots), 256, 0, stream>>>(h13, slots, m.intermediate, ip, act);
  check(cudaGetLastError(), "silu_and_mul", o);
  project(act, ip, 2, hp, y2, rows);
  combine<<<row_grid(m.hidden, tokens), 256, 0, stream>>>(y2, hp, at<std::int64_t>(ctx.routing, slots_at),
                                                          at<float>(ctx.routing, weights_at), route.top_k, tokens, m.hidden, out);
  check(cudaGetLastError(), "combine", o);
}

moe_kernel moe_forward(forward_context& ctx, const device_experts& m, fp8::weight_scales weights,
                       fp8::activation_quant activation, const activation_quantizer& quantize, const std::uint16_t* x,
                       std::int64_t tokens, const cpu::routing& route, std::uint16_t* out) {
  const std::int64_t hp = m.hidden_padded, ip = m.intermediate_padded, experts = m.experts;
  cpu::detail::check_implementable(weights, activation, hp, "moe_forward w13");
  cpu::detail::check_implementable(weights, activation, ip, "moe_forward w2");
  ctx.moe_loop_reason = grouped_refusal(ctx, m, weights, activation);
  const bool grouped = ctx.moe_loop_reason.empty();
  const auto& o = ctx.launch;
  // in [slots, k] (bf16) -> result [slots, n] with each expert's matrix on its rows.
  moe_pipeline(ctx, m, x, tokens, route, out,
               [&](const std::uint16_t* in, std::int64_t k, int which, std::int64_t n, std::uint16_t* result, const moe_rows& rows) {
                 const device_memory& w = which == 13 ? m.w13 : m.w2;
                 const device_memory& scales = which == 13 ? m.s13 : m.s2;
                 const std::int64_t scale_step = which == 13 ? m.s13_step : m.s2_step, scale_stride = which == 13 ? m.s13_stride : m.s2_stride;
                 if (grouped) {
                   quantize(ctx, in, rows.slots, k, fp8::scale_layout::row_major, rows.offsets, experts);
                   grouped_gemm(grouped_problem(weights, activation, ctx.codes.as<std::uint8_t>(), ctx.scales.as<float>(), w, scales,
                                                scale_step, scale_stride, n, k, result),
                                rows.tiles, rows.tile_count, o);
                   return;
                 }
                 for (std::int64_t e = 0; e < experts; ++e) {
                   const std::int64_t first = rows.count[static_cast<std::size_t>(e)], r = rows.count[static_cast<std::size_t>(e) + 1] - first;
                   if (r == 0) continue;
                   quantize(ctx, in + first * k, r, k, fp8::scale_layout::column_major, nullptr, 1);
                   ctx.runner.run({r, n, k, activation, weights, false},
                                  {ctx.codes.as<std::uint8_t>(), ctx.scales.as<float>(), w.as<std::uint8_t>() + e * n * k,
                                   scales.as<float>() + e * scale_step, scale_stride, nullptr, result + first * n},
                                  o, ctx.prefer);
                 }
               });
  return grouped ? moe_kernel::grouped : moe_kernel::loop;
}

}  // namespace detail

}  // namespace qpolicy::cuda
