// GPU suite: quantize_tensor_parts_on_device (the in-place path the Python package takes for CUDA
// tensors) against quantize_tensor_parts on the CPU, byte for byte, for every key and formula
// quantize-tensor implements, on bf16, fp16 and fp32 input. Exits 77 (skipped) without a usable device.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "qpolicy/config/config.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/kernels/cuda/device_info.hpp"
#include "qpolicy/numerics/block_formats.hpp"
#include "device_buffer.hpp"

namespace qp = qpolicy;

int main() {
  if (!qp::test::have_device("in-place device quantization test")) return 77;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  const std::int64_t rows = 130, cols = 256;
  std::vector<float> values(static_cast<std::size_t>(rows * cols));
  for (auto& v : values) v = normal(rng);
  int compared = 0;
  using qp::test::fail;
  std::string keys = qp::quantize_tensor_keys();
  for (std::size_t at = 0; at < keys.size();) {
    const auto end = keys.find(", ", at);
    const std::string name = keys.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? keys.size() : end + 2;
    const auto formula = *qp::schemes::find_formula(name);
    for (auto type : {qp::element::bf16, qp::element::f16, qp::element::f32}) {
      std::vector<std::uint16_t> half(values.size());
      for (std::size_t i = 0; i < values.size(); ++i)
        half[i] = type == qp::element::bf16 ? qp::fp8::to_bf16(values[i]) : qp::lp::to_fp16(values[i]);
      const void* host = type == qp::element::f32 ? static_cast<const void*>(values.data()) : half.data();
      const std::size_t bytes = values.size() * (type == qp::element::f32 ? 4 : 2);
      std::vector<qp::stored_part> want;
      try {
        want = qp::quantize_tensor_parts(formula, {host, type, rows, cols}, {});
      } catch (const qp::config_error&) {
        continue;  // a formula that refuses the element type refuses it on the device too (same checks)
      }
      const auto x = qp::cuda::to_device(host, bytes);
      const auto got = qp::quantize_tensor_parts_on_device(formula, {x.get(), type, rows, cols}, {});
      for (std::size_t p = 0; p < want.size(); ++p) {
        std::vector<std::uint8_t> back(want[p].bytes.size());
        qp::cuda::to_host(got[p].memory, back.data(), back.size());
        if (got[p].suffix != want[p].suffix || got[p].shape != want[p].shape || back != want[p].bytes)
          fail(name + ", input type " + std::to_string(static_cast<int>(type)) + ": part '" + want[p].suffix + "' differs");
      }
      ++compared;
    }
  }
  std::printf("%d key and input type pairs compared, %d failures\n", compared, qp::test::failures);
  return qp::test::failures ? 1 : 0;
}
