// GPU suite: the weight-only GEMM kernel of every weight formula (W8A16: MXFP8, INT8; W4A16: MXFP4,
// NVFP4) on the grouped problems the CPU emulation of its tile arithmetic passes (experts without
// rows, partial tiles, N and K off the tile grid), against spec §9's bound. Builds with nvcc alone.
// Exits 77 (skipped) with the reason when there is no usable device.
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "../numerics/weight_only_case.hpp"
#include "device_buffer.hpp"
#include "qpolicy/kernels/cuda/weight_only_gemm.hpp"

namespace qp = qpolicy;
using qpolicy::test::device_buffer;
using qpolicy::test::fail;
using qpolicy::test::failures;

namespace {

template <qp::schemes::formula F>
void check(std::int64_t k) {
  const qp::test::weight_only_case<F> c(k);
  const device_buffer<std::uint16_t> a(c.a);
  const device_buffer<std::uint8_t> codes(c.codes), scales(c.scales), codebooks(c.codebooks.empty() ? std::vector<std::uint8_t>(1) : c.codebooks);
  const device_buffer<float> row_scales(c.row_scales), tensor_scales(c.tensor_scales), a_scale(c.a_scale);
  device_buffer<std::uint16_t> out(static_cast<std::size_t>(c.rows * c.n));
  const auto p = c.problem(a.ptr, codes.ptr, scales.ptr, row_scales.ptr, tensor_scales.ptr, a_scale.ptr, out.ptr, codebooks.ptr);
  qp::cuda::weight_only_gemm<qp::formula_tag<F>>(p, c.offsets, c.experts);
  std::string first;
  const auto bad = c.violations(out.get(static_cast<std::size_t>(c.rows * c.n)), first);
  const auto& f = qp::schemes::formula_of(F);
  std::printf("%s, K = %lld: %lld outputs outside the bound\n", std::string(f.name).c_str(), static_cast<long long>(k),
              static_cast<long long>(bad));
  if (bad) fail(std::string(f.name) + ": " + first);
}

}  // namespace

int main() {
  if (!qpolicy::test::have_device("GPU weight-only GEMM tests")) return 77;
  check<qp::schemes::formula::mxfp8_torch>(96);
  check<qp::schemes::formula::mxfp4_even>(160);
  check<qp::schemes::formula::int8_per_channel>(72);
  check<qp::schemes::formula::nvfp4_weight>(48);
  check<qp::schemes::formula::mxfp4_even>(2048);
  check<qp::schemes::formula::lut_b>(192);
  if (cudaDeviceSynchronize() != cudaSuccess) fail("cudaDeviceSynchronize");
  std::printf("%s: %d failures\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
