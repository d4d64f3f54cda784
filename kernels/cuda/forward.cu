// Forward passes on the GPU: activation quantization, GEMMs through the gemm_runner, and the small
// kernels of a MoE layer (gather, SiLU-and-mul, weighted combine) around its expert GEMMs (one grouped
// launch per projection, or the per-expert loop). Thin __global__ functions over the
// shared arithmetic; the MoE routing is planned on the host as in the CPU pass.
#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_check.hpp"
#include "forward.hpp"
#include "grouped_gemm.hpp"

namespace qpolicy::cuda {

namespace {

using detail::check;
using detail::stream_of;

void copy_up(device_memory& d, const void* host, std::size_t bytes, const launch_options& o = {}) {
  d = device_memory(bytes);
  if (bytes) check(cudaMemcpy(d.get(), host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (upload)", o);
}

/// A row-major [rows, k_blocks] block-scale grid with `stride` scales per row (cuBLASLt's padding).
std::vector<float> restride(const float* s, std::int64_t rows, std::int64_t k_blocks, std::int64_t stride) {
  std::vector<float> out(static_cast<std::size_t>(rows * stride), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < k_blocks; ++g) out[static_cast<std::size_t>(r * stride + g)] = s[r * k_blocks + g];
  return out;
}

/// Quantizes x[rows, k] (bf16, device) into ctx.codes / ctx.scales with quantizer `act`; 1x128 group
/// scales in `groups` layout (cuBLASLt reads them column-major, the grouped kernel row-major). With
/// `segments` (device row offsets, a MoE layer's experts) a per-tensor quantizer gives each segment
/// its own scale; the row-wise quantizers need no segments.
void quantize_activation(forward_context& ctx, fp8::activation_quant act, const std::uint16_t* x, std::int64_t rows,
                         std::int64_t k, fp8::scale_layout groups = fp8::scale_layout::column_major,
                         const std::int64_t* segment_offsets = nullptr, std::int64_t segments = 1) {
  const fp8::input_view xv{x, fp8::element::bf16, rows, k};
  ctx.codes.reserve(static_cast<std::size_t>(rows * k));
  switch (act) {
    case fp8::activation_quant::per_tensor:
      ctx.scales.reserve(sizeof(float) * static_cast<std::size_t>(segments));
      ctx.amax.reserve(sizeof(std::uint32_t) * static_cast<std::size_t>(segments));
      if (segment_offsets)
        quantize_segments_per_tensor(xv, segment_offsets, segments, ctx.codes.as<std::uint8_t>(), ctx.scales.as<float>(),
                                     ctx.amax.as<std::uint32_t>(), ctx.launch);
      else
        activation_kernel<fp8_per_tensor_dynamic>::run(xv, ctx.codes.as<std::uint8_t>(), ctx.scales.as<float>(),
                                                       ctx.amax.as<std::uint32_t>(), ctx.launch);
      break;
    case fp8::activation_quant::per_token:
      ctx.scales.reserve(sizeof(float) * static_cast<std::size_t>(rows));
      activation_kernel<fp8_per_token>::run(xv, ctx.codes.as<std::uint8_t>(), ctx.scales.as<float>(), ctx.launch);
      break;
    case fp8::activation_quant::group_128:
      ctx.scales.reserve(sizeof(float) * static_cast<std::size_t>(rows * (k / 128)));
      activation_kernel<fp8_per_block_dynamic>::run(xv, {128, false, groups}, ctx.codes.as<std::uint8_t>(),
                                                    ctx.scales.as<float>(), ctx.launch);
      break;
  }
}

void check_implementable(fp8::weight_scales w, fp8::activation_quant a, std::int64_t k, const char* what) {
  if (auto why = cpu::can_implement(w, a, k); !why.empty()) throw std::invalid_argument(std::string(what) + ": " + why);
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

device_memory::device_memory(std::size_t bytes) : bytes_(bytes) {
  check(cudaMalloc(&ptr_, bytes ? bytes : 1), "cudaMalloc", {});
}
device_memory::device_memory(device_memory&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}
device_memory& device_memory::operator=(device_memory&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}
device_memory::~device_memory() {
  if (ptr_) cudaFree(ptr_);
}
void device_memory::reserve(std::size_t bytes) {
  if (bytes > bytes_ || !ptr_) *this = device_memory(bytes);
}

device_memory to_device(const void* host, std::size_t bytes) {
  device_memory d;
  copy_up(d, host, bytes);
  return d;
}
void to_host(const device_memory& from, void* host, std::size_t bytes) {
  if (bytes) check(cudaMemcpy(host, from.get(), bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (to the host)", {});
}
void synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", {}); }

device_linear upload(const cpu::fp8_linear& l) {
  device_linear d;
  d.weights = l.weights;
  d.activation = l.activation;
  d.out_features = l.out_features;
  d.in_features = l.in_features;
  copy_up(d.codes, l.codes.data(), l.codes.size());
  if (l.weights == fp8::weight_scales::block_128x128) {
    d.w_scale_stride = fp8::cublaslt_block_scale_stride(l.in_features);
    const auto s = restride(l.scales.data(), (l.out_features + 127) / 128, l.in_features / 128, d.w_scale_stride);
    copy_up(d.scales, s.data(), s.size() * sizeof(float));
  } else {
    copy_up(d.scales, l.scales.data(), l.scales.size() * sizeof(float));
  }
  if (!l.bias.empty()) {
    std::vector<std::uint16_t> b(l.bias.size());
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = fp8::to_bf16(l.bias[i]);
    copy_up(d.bias, b.data(), b.size() * sizeof(std::uint16_t));
  }
  return d;
}

gemm_backend linear_forward(forward_context& ctx, const device_linear& layer, const std::uint16_t* x, std::int64_t rows,
                            std::uint16_t* out) {
  check_implementable(layer.weights, layer.activation, layer.in_features, "linear_forward");
  if (rows == 0) return ctx.prefer;  // nothing to compute, as on the CPU
  quantize_activation(ctx, layer.activation, x, rows, layer.in_features);
  const bool bias = layer.bias.get() != nullptr;
  return ctx.runner.run({rows, layer.out_features, layer.in_features, layer.activation, layer.weights, bias},
                        {ctx.codes.as<std::uint8_t>(), ctx.scales.as<float>(), layer.codes.as<std::uint8_t>(),
                         layer.scales.as<float>(), layer.w_scale_stride, bias ? layer.bias.as<std::uint16_t>() : nullptr, out},
                        ctx.launch, ctx.prefer);
}

device_moe upload(const cpu::fp8_moe& m) {
  device_moe d;
  d.weights = m.weights;
  d.activation = m.activation;
  d.experts = m.experts;
  d.hidden = m.hidden;
  d.intermediate = m.intermediate;
  d.hidden_padded = m.hidden_padded;
  d.intermediate_padded = m.intermediate_padded;
  const std::int64_t hp = m.hidden_padded, ip = m.intermediate_padded;
  copy_up(d.w13, m.w13.data(), m.w13.size());
  copy_up(d.w2, m.w2.data(), m.w2.size());
  switch (m.weights) {
    case fp8::weight_scales::per_tensor:
      d.s13_step = d.s2_step = 1;
      copy_up(d.s13, m.s13.data(), m.s13.size() * sizeof(float));
      copy_up(d.s2, m.s2.data(), m.s2.size() * sizeof(float));
      break;
    case fp8::weight_scales::per_channel:
      d.s13_step = 2 * ip;
      d.s2_step = hp;
      copy_up(d.s13, m.s13.data(), m.s13.size() * sizeof(float));
      copy_up(d.s2, m.s2.data(), m.s2.size() * sizeof(float));
      break;
    case fp8::weight_scales::block_128x128: {
      d.s13_stride = fp8::cublaslt_block_scale_stride(hp);
      d.s2_stride = fp8::cublaslt_block_scale_stride(ip);
      d.s13_step = (2 * ip / 128) * d.s13_stride;
      d.s2_step = (hp / 128) * d.s2_stride;
      // Each expert's grid restrided on its own: E grids of [2Ip/128, Hp/128] and [Hp/128, Ip/128].
      const auto s13 = restride(m.s13.data(), m.experts * (2 * ip / 128), hp / 128, d.s13_stride);
      const auto s2 = restride(m.s2.data(), m.experts * (hp / 128), ip / 128, d.s2_stride);
      copy_up(d.s13, s13.data(), s13.size() * sizeof(float));
      copy_up(d.s2, s2.data(), s2.size() * sizeof(float));
      break;
    }
  }
  return d;
}

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
fp8::grouped::problem grouped_problem(const device_moe& m, const std::uint8_t* a, const float* a_scale, const device_memory& w,
                                      const device_memory& scales, std::int64_t step, std::int64_t stride, std::int64_t n,
                                      std::int64_t k, std::uint16_t* out) {
  return {a, w.as<std::uint8_t>(), a_scale, scales.as<float>(), step, stride, out, n, k, m.activation, m.weights};
}

/// Why the grouped kernel cannot run this layer now, or empty.
std::string grouped_refusal(const forward_context& ctx, const device_moe& m) {
  if (ctx.moe == moe_kernel::loop) return "the context asks for the per-expert loop";
  if (ctx.prefer == gemm_backend::fallback) return "the bit-exact fallback GEMM runs per expert";
  const int sm = current_sm();
  const std::int64_t hp = m.hidden_padded, ip = m.intermediate_padded;
  fp8::grouped::problem p{nullptr, nullptr, nullptr, nullptr, 0, 0, nullptr, 2 * ip, hp, m.activation, m.weights};
  if (auto why = grouped_can_implement(p, sm); !why.empty()) return "w13: " + why;
  p.n = hp;
  p.k = ip;
  if (auto why = grouped_can_implement(p, sm); !why.empty()) return "w2: " + why;
  return {};
}

}  // namespace

moe_kernel moe_forward(forward_context& ctx, const device_moe& m, const std::uint16_t* x, std::int64_t tokens,
                       const cpu::routing& route, std::uint16_t* out) {
  const std::int64_t hp = m.hidden_padded, ip = m.intermediate_padded, experts = m.experts;
  check_implementable(m.weights, m.activation, hp, "moe_forward w13");
  check_implementable(m.weights, m.activation, ip, "moe_forward w2");
  const auto plan = cpu::plan_routing(route, tokens, experts);  // on the host, as on the CPU
  const std::int64_t slots = tokens * route.top_k;
  if (tokens == 0) return ctx.moe;  // no rows: no launches
  const auto& count = plan.first;
  const auto& o = ctx.launch;
  const auto stream = stream_of(o);
  ctx.moe_loop_reason = grouped_refusal(ctx, m);
  const bool grouped = ctx.moe_loop_reason.empty();
  const auto tiles = grouped ? fp8::grouped::make_tiles(count.data(), experts) : std::vector<fp8::grouped::tile>{};
  upload_pack pack;
  const std::size_t rows_at = pack.add(plan.token_of_row.data(), plan.token_of_row.size());
  const std::size_t slots_at = pack.add(plan.row_of_slot.data(), plan.row_of_slot.size());
  const std::size_t weights_at = pack.add(route.weights, static_cast<std::size_t>(slots));
  const std::size_t offsets_at = pack.add(count.data(), count.size());
  const std::size_t tiles_at = pack.add(tiles.data(), tiles.size());
  pack.upload(ctx.routing, o);
  const auto* offsets = at<std::int64_t>(ctx.routing, offsets_at);
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
  // in [slots, k] (bf16) -> result [slots, n] with each expert's matrix on its rows.
  auto project = [&](const std::uint16_t* in, std::int64_t k, const device_memory& w, const device_memory& scales,
                     std::int64_t scale_step, std::int64_t scale_stride, std::int64_t n, std::uint16_t* result) {
    if (grouped) {
      quantize_activation(ctx, m.activation, in, slots, k, fp8::scale_layout::row_major, offsets, experts);
      grouped_gemm(grouped_problem(m, ctx.codes.as<std::uint8_t>(), ctx.scales.as<float>(), w, scales, scale_step, scale_stride, n,
                                   k, result),
                   at<fp8::grouped::tile>(ctx.routing, tiles_at), static_cast<std::int64_t>(tiles.size()), o);
      return;
    }
    for (std::int64_t e = 0; e < experts; ++e) {
      const std::int64_t first = count[static_cast<std::size_t>(e)], rows = count[static_cast<std::size_t>(e) + 1] - first;
      if (rows == 0) continue;
      quantize_activation(ctx, m.activation, in + first * k, rows, k);
      ctx.runner.run({rows, n, k, m.activation, m.weights, false},
                     {ctx.codes.as<std::uint8_t>(), ctx.scales.as<float>(), w.as<std::uint8_t>() + e * n * k,
                      scales.as<float>() + e * scale_step, scale_stride, nullptr, result + first * n},
                     o, ctx.prefer);
    }
  };
  project(xin, hp, m.w13, m.s13, m.s13_step, m.s13_stride, 2 * ip, h13);
  silu_and_mul<<<row_grid(ip, slots), 256, 0, stream>>>(h13, slots, m.intermediate, ip, act);
  check(cudaGetLastError(), "silu_and_mul", o);
  project(act, ip, m.w2, m.s2, m.s2_step, m.s2_stride, hp, y2);
  combine<<<row_grid(m.hidden, tokens), 256, 0, stream>>>(y2, hp, at<std::int64_t>(ctx.routing, slots_at),
                                                          at<float>(ctx.routing, weights_at), route.top_k, tokens, m.hidden, out);
  check(cudaGetLastError(), "combine", o);
  return grouped ? moe_kernel::grouped : moe_kernel::loop;
}

}  // namespace qpolicy::cuda
