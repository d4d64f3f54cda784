// GPU suite: the grouped FP8 GEMM kernel (every expert in one launch) against spec §10's bound in
// float64, on the CPU emulation's edge shapes and a MoE-sized problem with 64 experts of random row
// counts; and the segmented per-tensor activation quantization against the CPU reference per
// segment, bit for bit. Exits 77 without a device, or without FP8 tensor cores (sm < 89).
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "qpolicy/kernels/cpu/reference.hpp"
#include "qpolicy/kernels/cuda/grouped_gemm.hpp"
#include "../numerics/grouped_case.hpp"
#include "device_buffer.hpp"

namespace fp8 = qpolicy::fp8;
namespace g = qpolicy::fp8::grouped;
namespace cuda = qpolicy::cuda;
using qpolicy::test::device_buffer;
using qpolicy::test::fail;
using qpolicy::test::failures;
using qpolicy::test::grouped_case;

namespace {

void check_grouped(const grouped_case& c) {
  device_buffer<std::uint8_t> a(c.a), w(c.w);
  device_buffer<float> as(c.a_scale), ws(c.w_scale);
  device_buffer<std::uint16_t> out(std::vector<std::uint16_t>(static_cast<std::size_t>(c.rows * c.n), 0xFFFF));
  const auto tiles = g::make_tiles(c.offsets.data(), c.experts);
  std::vector<std::int32_t> flat;
  for (const auto& t : tiles) flat.insert(flat.end(), {t.expert, t.row_begin, t.row_end});
  device_buffer<std::int32_t> dtiles(flat);
  cuda::grouped_gemm(c.problem(a.ptr, w.ptr, as.ptr, ws.ptr, out.ptr), reinterpret_cast<const g::tile*>(dtiles.ptr),
                     static_cast<std::int64_t>(tiles.size()));
  const auto why = qpolicy::test::check_grouped_bound(c, out.get(static_cast<std::size_t>(c.rows * c.n)));
  std::printf("  %s: %s\n", c.name().substr(0, 120).c_str(), why.empty() ? "within the bound" : "OUT OF BOUND");
  if (!why.empty()) fail(why);
}

void check_segments(std::mt19937& rng) {
  const std::vector<std::int64_t> offsets = {0, 0, 3, 200, 200, 517};
  const std::int64_t cols = 264, rows = offsets.back(), segments = static_cast<std::int64_t>(offsets.size()) - 1;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::uint16_t> x(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = fp8::to_bf16(normal(rng) * static_cast<float>(1 + i / 20000));
  device_buffer<std::uint16_t> dx(x);
  device_buffer<std::int64_t> doff(offsets);
  device_buffer<std::uint8_t> dq(x.size());
  device_buffer<float> ds(static_cast<std::size_t>(segments));
  device_buffer<std::uint32_t> scratch(static_cast<std::size_t>(segments));
  cuda::quantize_segments_per_tensor({dx.ptr, qpolicy::element::bf16, rows, cols}, doff.ptr, segments, dq.ptr, ds.ptr, scratch.ptr);
  const auto q = dq.get(x.size());
  const auto s = ds.get(static_cast<std::size_t>(segments));
  for (std::int64_t e = 0; e < segments; ++e) {
    const std::int64_t first = offsets[e], n = offsets[e + 1] - first;
    if (n == 0) continue;
    std::vector<std::uint8_t> want(static_cast<std::size_t>(n * cols));
    float want_scale = 0;
    qpolicy::cpu::reference::dynamic_per_tensor({x.data() + first * cols, qpolicy::element::bf16, n, cols}, want.data(), &want_scale);
    if (fp8::bits_of(want_scale) != fp8::bits_of(s[static_cast<std::size_t>(e)]))
      fail("segment " + std::to_string(e) + ": scale " + std::to_string(s[static_cast<std::size_t>(e)]) + ", the CPU's " +
           std::to_string(want_scale));
    if (!std::equal(want.begin(), want.end(), q.begin() + first * cols))
      fail("segment " + std::to_string(e) + ": codes differ from the CPU's");
  }
  std::printf("  segmented per-tensor quantization: %lld segments checked against the CPU reference\n",
              static_cast<long long>(segments));
}

}  // namespace

int main() {
  if (!qpolicy::test::have_device("grouped GEMM tests")) return 77;
  if (const int sm = cuda::current_sm(); sm < 89) {
    std::printf("SKIP: the grouped FP8 GEMM needs compute capability 8.9 or newer, this device is %d.%d\n", sm / 10, sm % 10);
    return 77;
  }
  std::mt19937 rng(23);
  using fp8::activation_quant;
  using fp8::weight_scales;
  for (const auto& c : qpolicy::test::grouped_edge_cases(rng)) check_grouped(c);
  // MoE-sized: 64 experts with 0..95 rows each, w13-like N = 2 x 192 over K = 512.
  std::vector<std::int64_t> moe_rows(64);
  for (auto& r : moe_rows) r = static_cast<std::int64_t>(rng() % 96);
  check_grouped(qpolicy::test::make_grouped_case(moe_rows, 384, 512, activation_quant::group_128, weight_scales::block_128x128, rng));
  check_grouped(qpolicy::test::make_grouped_case(moe_rows, 384, 512, activation_quant::per_tensor, weight_scales::per_tensor, rng));
  check_segments(rng);
  if (failures) {
    std::printf("%d failure(s)\n", failures);
    return 1;
  }
  std::printf("the grouped GEMM meets spec §10's bound on every case\n");
  return 0;
}
