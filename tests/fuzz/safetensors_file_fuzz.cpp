// libFuzzer target over whole safetensors files: the input is the file. It is opened through the
// reader (from an in-memory file, so no disk I/O), and every 2-D float tensor's elements are decoded
// through the kernels' input views at whatever alignment the file gives them. Anything but success or
// config_error is a finding.
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_target.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/io/safetensors.hpp"

namespace st = qpolicy::safetensors;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const int fd = ::memfd_create("qpolicy-fuzz", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
  try {
    st::file f("/proc/self/fd/" + std::to_string(fd));
    float sum = 0;
    std::vector<std::uint32_t> scratch;
    for (const auto& t : f.tensors()) {
      (void)f.find(t.name);
      const auto bytes = f.data(t);
      if (t.shape.size() != 2 || (t.type != st::dtype::BF16 && t.type != st::dtype::F16 && t.type != st::dtype::F32)) continue;
      const auto type = t.type == st::dtype::BF16 ? qpolicy::element::bf16
                        : t.type == st::dtype::F16 ? qpolicy::element::f16 : qpolicy::element::f32;
      for (const auto& view : {qpolicy::input_view{bytes.data(), type, t.shape[0], t.shape[1]},
                               qpolicy::aligned_input(bytes, type, t.shape[0], t.shape[1], scratch)})
        for (std::int64_t i = 0; i < view.size() && i < 4096; ++i) sum += view.at(i);
      if (t.elements() > 0 && t.elements() <= 4096) {
        qpolicy::tensor_quant_options o;
        o.threads = 1;
        (void)qpolicy::quantize_tensor_parts(qpolicy::schemes::formula::fp8_per_token,
                                            qpolicy::aligned_input(bytes, type, t.shape[0], t.shape[1], scratch), o);
      }
    }
    (void)sum;
  } catch (const qpolicy::config_error&) {
  }
  return 0;
}

std::vector<std::string> qpolicy::fuzz::seeds() {
  using qpolicy::fuzz::safetensors_bytes;
  return {
      safetensors_bytes(R"({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}})", std::string(12, '\x3f')),
      safetensors_bytes(R"({"__metadata__": {"format": "pt"}, "b": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
        "w": {"dtype": "F16", "shape": [2, 2], "data_offsets": [1, 9]}})", std::string(9, '\x3c')),
      // Crash inputs of the issue: a huge zero-element tensor and one whose dimensions overflow.
      safetensors_bytes(R"({"w": {"dtype": "BF16", "shape": [9223372036854775807, 0], "data_offsets": [0, 0]}})", ""),
      safetensors_bytes(R"({"w": {"dtype": "BF16", "shape": [1099511627776, 0], "data_offsets": [0, 0]}})", ""),
      safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [18446744073709551615, 1], "data_offsets": [0, 0]}})", ""),
      safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [1099511627776, 1099511627776, 0], "data_offsets": [0, 0]}})", ""),
      le64(3) + "{}",
  };
}
