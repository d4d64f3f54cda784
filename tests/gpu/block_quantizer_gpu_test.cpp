// GPU suite: every CUDA low-precision quantizer against the CPU reference, bit for bit, on the inputs
// of every vector of shared/conformance/low_precision_cases.json (QPOLICY_LOW_PRECISION_CASES; the CPU
// reference meets those vectors in the numerics suite, so equality here is conformance on the device)
// and on random shapes with the special values the spec singles out, row-major and 128x4 scales.
// Builds with nvcc alone (no JSON library: the inputs are scanned from the file's text). Exits 77
// (skipped) with the reason when there is no usable device.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "../numerics/block_quantizer_impls.hpp"
#include "../support/type_lists.hpp"
#include "device_buffer.hpp"
#include "qpolicy/kernels/cpu/block_quantizer.hpp"
#include "qpolicy/kernels/cuda/block_quantizer.hpp"

namespace qp = qpolicy;
namespace fp8 = qpolicy::fp8;
using qpolicy::test::fail;
using qpolicy::test::failures;
using qpolicy::test::low_precision::quantizer_buffers;

namespace {

/// One input tensor: the last dimension as columns.
struct input {
  std::string id;
  qpolicy::element type;
  std::int64_t rows, cols;
  std::vector<std::uint16_t> bits;
};

/// The bf16/fp16 input tensors of the vectors file: every `"shape": [...]` followed by a `bf16_hex` or
/// `f16_hex` string, named after the nearest preceding case id.
std::vector<input> vector_inputs(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  std::vector<input> out;
  for (std::size_t at = text.find("\"shape\": ["); at != std::string::npos; at = text.find("\"shape\": [", at + 1)) {
    std::vector<std::int64_t> shape;
    std::size_t p = at + 10;
    while (p < text.size() && text[p] != ']') {
      if (text[p] >= '0' && text[p] <= '9') {
        std::size_t used = 0;
        shape.push_back(std::stoll(text.substr(p, 20), &used));
        p += used;
      } else {
        ++p;
      }
    }
    const std::size_t close = text.find('}', p);
    const std::size_t bf = text.find("\"bf16_hex\": \"", p), f16 = text.find("\"f16_hex\": \"", p);
    const bool is_bf16 = bf < close, is_f16 = f16 < close;
    if (shape.empty() || (!is_bf16 && !is_f16)) continue;
    const std::size_t hex = is_bf16 ? bf + 13 : f16 + 12;
    const std::size_t end = text.find('"', hex);
    input t{"", is_bf16 ? qpolicy::element::bf16 : qpolicy::element::f16, 1, shape.back(), {}};
    for (std::size_t d = 0; d + 1 < shape.size(); ++d) t.rows *= shape[d];
    for (std::size_t i = hex; i + 4 <= end; i += 4) t.bits.push_back(static_cast<std::uint16_t>(std::stoul(text.substr(i, 4), nullptr, 16)));
    const std::size_t id = text.rfind("\"id\": \"", at);
    if (id != std::string::npos) t.id = text.substr(id + 7, text.find('"', id + 7) - id - 7);
    if (static_cast<std::int64_t>(t.bits.size()) == t.rows * t.cols) out.push_back(std::move(t));
  }
  return out;
}

/// Random values in blocks of one regime each: ties of e2m1 and e4m3 at a common binade, normals,
/// zeros, subnormal-range and huge blocks, NaN and infinity (bf16), negative zeros.
input random_input(std::mt19937& rng, qpolicy::element type, std::int64_t rows, std::int64_t cols) {
  input t{"random", type, rows, cols, {}};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 7.0f, 448.0f, 464.0f, 1.5f};
  const bool bf16 = type == qpolicy::element::bf16;
  for (std::int64_t r = 0; r < rows; ++r) {
    const int row_mode = static_cast<int>(rng() % 100);
    for (std::int64_t c0 = 0; c0 < cols; c0 += 16) {
      const int mode = static_cast<int>(rng() % 100);
      const int e = row_mode < 5 ? (bf16 ? -135 : -20) + static_cast<int>(rng() % 8) : row_mode < 10 ? (bf16 ? 110 : 8) : static_cast<int>(rng() % 20) - 10;
      for (std::int64_t c = c0; c < std::min(cols, c0 + 16); ++c) {
        float v = row_mode >= 95 || mode < 8 ? 0.0f
                  : mode < 40                ? std::ldexp(ties[rng() % 12], e) * ((rng() & 1) ? -1.0f : 1.0f)
                                             : std::ldexp(normal(rng), e);
        const int p = static_cast<int>(rng() % 100);
        if (bf16 && p == 0) v = NAN;
        else if (bf16 && p == 1) v = (rng() & 1) ? INFINITY : -INFINITY;
        else if (p == 2) v = -0.0f;
        if (!bf16 && std::isfinite(v)) v = std::fmin(std::fmax(v, -60000.0f), 60000.0f);
        t.bits.push_back(bf16 ? fp8::to_bf16(v) : qp::lp::to_fp16(v));
      }
    }
  }
  return t;
}

bool same_float(float a, float b) { return fp8::bits_of(a) == fp8::bits_of(b) || (std::isnan(a) && std::isnan(b)); }

/// Formula tag Formula on the device (cuda::quantize), its parts copied into `out`.
template <class Formula>
void cuda_quantize(const qpolicy::input_view& x, quantizer_buffers& out) {
  const auto& f = qp::schemes::formula_of(Formula::id);
  const auto o = out.outputs(f);
  const bool floats = out.block_scales.empty();
  qpolicy::test::quantize_on_device<Formula>(
      x, {o.codes, out.codes.size(), o.scales, floats ? out.row_scales.size() * sizeof(float) : out.block_scales.size(), o.second,
          f.second == qp::schemes::second_scale::none || f.second == qp::schemes::second_scale::codebook ? 0
          : f.second == qp::schemes::second_scale::per_token                                            ? out.row_scales.size()
                                                                                                          : 1,
          out.codebook.empty() ? nullptr : out.codebook.data(), out.codebook.size()},
      {false, {}, out.swizzled});
}

/// CUDA against the CPU reference for formula tag Formula on one input, both scale layouts.
template <class Formula>
void check(const input& t, int& runs) {
  const auto& f = qp::schemes::formula_of(Formula::id);
  if (!qp::schemes::takes_shape(f, t.rows, t.cols)) return;
  const qpolicy::input_view x{t.bits.data(), t.type, t.rows, t.cols};
  for (const bool swizzled : {false, true}) {
    if (swizzled && (!f.block() || f.tiled())) continue;
    quantizer_buffers gpu(Formula::id, t.rows, t.cols, swizzled), cpu(Formula::id, t.rows, t.cols, swizzled);
    cuda_quantize<Formula>(x, gpu);
    qp::test::low_precision::reference_quantize<Formula>(x, cpu);
    ++runs;
    const std::string where = std::string(f.name) + " on " + t.id + " " + std::to_string(t.rows) + "x" + std::to_string(t.cols) +
                              (swizzled ? " (128x4 scales)" : "");
    for (std::size_t i = 0; i < cpu.codes.size(); ++i)
      if (gpu.codes[i] != cpu.codes[i]) {
        fail(where + ": code byte " + std::to_string(i) + " " + std::to_string(gpu.codes[i]) + " vs " + std::to_string(cpu.codes[i]));
        break;
      }
    if (gpu.block_scales != cpu.block_scales) fail(where + ": block scales differ");
    if (gpu.codebook != cpu.codebook) fail(where + ": codebooks differ");
    if (f.scales == qp::schemes::scale_format::f32 || f.second == qp::schemes::second_scale::per_token)
      for (std::size_t r = 0; r < cpu.row_scales.size(); ++r)
        if (!same_float(gpu.row_scales[r], cpu.row_scales[r])) {
          fail(where + ": row scale " + std::to_string(r));
          break;
        }
    if (f.second == qp::schemes::second_scale::per_tensor && !same_float(gpu.tensor_scale[0], cpu.tensor_scale[0]))
      fail(where + ": tensor scale");
  }
}

/// The rotation alone and the LUT-B decode on the device against the CPU paths (new-schemes §A.3, §B.4).
void check_rotation_and_decode(const input& t, int& runs) {
  namespace cuda = qpolicy::cuda;
  const qpolicy::input_view x{t.bits.data(), t.type, t.rows, t.cols};
  const auto in = cuda::to_device(t.bits.data(), t.bits.size() * 2);
  if (t.cols % 32 == 0) {
    std::vector<float> want(t.bits.size()), got(t.bits.size());
    std::vector<std::uint16_t> bits(t.bits.size());
    qp::cpu::hadamard_rotate(x, 32, bits.data());
    for (std::size_t i = 0; i < bits.size(); ++i) want[i] = t.type == qpolicy::element::f16 ? fp8::from_fp16(bits[i]) : fp8::from_bf16(bits[i]);
    cuda::device_memory out(got.size() * sizeof(float));
    cuda::hadamard_rotate({in.get(), t.type, t.rows, t.cols}, 32, out.as<float>());
    cuda::synchronize();
    cuda::to_host(out, got.data(), got.size() * sizeof(float));
    ++runs;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!same_float(got[i], want[i])) {
        fail("Hadamard rotation of " + t.id + ": element " + std::to_string(i));
        break;
      }
  }
  const auto& f = qp::schemes::formula_of(qp::schemes::formula::lut_b);
  if (!qp::schemes::takes_shape(f, t.rows, t.cols)) return;
  quantizer_buffers q(qp::schemes::formula::lut_b, t.rows, t.cols, false);
  qp::test::low_precision::reference_quantize<qp::formulas::lut_b>(x, q);
  for (const auto type : {qpolicy::element::bf16, qpolicy::element::f16}) {
    std::vector<std::uint16_t> want(t.bits.size()), got(t.bits.size());
    qp::cpu::lut_b_dequantize(q.codes.data(), q.codebook.data(), q.block_scales.data(), t.rows, t.cols, type, want.data());
    const auto codes = cuda::to_device(q.codes.data(), q.codes.size()), books = cuda::to_device(q.codebook.data(), q.codebook.size()),
               scales = cuda::to_device(q.block_scales.data(), q.block_scales.size());
    cuda::device_memory out(got.size() * 2);
    cuda::lut_b_dequantize(codes.as<std::uint8_t>(), books.as<std::uint8_t>(), scales.as<std::uint8_t>(), t.rows, t.cols, type,
                           out.as<std::uint16_t>());
    cuda::synchronize();
    cuda::to_host(out, got.data(), got.size() * 2);
    ++runs;
    if (got != want) fail("LUT-B decode of " + t.id);
  }
}

void check_all(const input& t, int& runs) {
  std::apply([&](auto... formula) { (check<decltype(formula)>(t, runs), ...); }, qpolicy::test::low_precision_formulas{});
}

}  // namespace

int main() {
  if (!qpolicy::test::have_device("GPU low-precision quantizer tests")) return 77;
  int runs = 0;
  const char* path = std::getenv("QPOLICY_LOW_PRECISION_CASES");
  const auto vectors = path ? vector_inputs(path) : std::vector<input>{};
  if (vectors.empty()) {
    std::printf("FAIL: no vector inputs read from QPOLICY_LOW_PRECISION_CASES=%s\n", path ? path : "(unset)");
    return 1;
  }
  for (const auto& t : vectors) check_all(t, runs);
  std::printf("vectors: %zu inputs of %s, every formula that takes their shape\n", vectors.size(), path);
  // vLLM 0.34's schemes: the inputs of new_schemes_cases.json (the Hadamard keys, LUT-B) the same way.
  const char* new_path = std::getenv("QPOLICY_NEW_SCHEMES_CASES");
  const auto new_vectors = new_path ? vector_inputs(new_path) : std::vector<input>{};
  if (new_vectors.empty()) {
    std::printf("FAIL: no vector inputs read from QPOLICY_NEW_SCHEMES_CASES=%s\n", new_path ? new_path : "(unset)");
    return 1;
  }
  for (const auto& t : new_vectors) {
    check_all(t, runs);
    check_rotation_and_decode(t, runs);
  }
  std::printf("vectors: %zu inputs of %s\n", new_vectors.size(), new_path);
  std::mt19937 rng(13);
  for (int round = 0; round < 30; ++round) {
    const auto type = round % 3 == 2 ? qpolicy::element::f16 : qpolicy::element::bf16;
    const std::int64_t rows = 8 * (1 + static_cast<std::int64_t>(rng() % 40)) - (round % 4 == 1 ? 3 : 0);
    const std::int64_t cols = 32 * (1 + static_cast<std::int64_t>(rng() % 12));
    check_all(random_input(rng, type, rows, cols), runs);
  }
  if (cudaDeviceSynchronize() != cudaSuccess) fail("cudaDeviceSynchronize");
  std::printf("%s: %d quantizer runs compared with the CPU reference, %d mismatches\n", failures ? "FAIL" : "ok", runs, failures);
  return failures ? 1 : 0;
}
