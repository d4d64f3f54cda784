// `qpolicy quantize-tensor --key KEY --dequantize`: every formula's stored tensors, as quantize-tensor
// writes them, decoded by the command to what the library's decoder gives (dequantize_test.cpp checks
// that against the formats), in f32, bf16 and fp16; and the refusals of parts that are missing or
// mis-shaped, naming the part and what was expected, with nothing written.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <random>

#include "../support/quantize_tensor_cli.hpp"
#include "../support/random_operands.hpp"
#include "../support/type_lists.hpp"
#include "qpolicy/kernels/cpu/dequantize.hpp"
#include "qpolicy/kernels/cuda/device_info.hpp"

namespace st = qpolicy::safetensors;
namespace qp = qpolicy;

namespace {

std::vector<float> floats_of(const std::vector<std::uint8_t>& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("quantize-tensor --dequantize decodes every formula's stored tensors as the library does", "[cli][dequantize]",
                        qpolicy::test::all_formulas) {
  using Formula = TestType;
  const auto& f = qp::schemes::formula_of(Formula::id);
  if (f.tiled()) return;  // LUT-B's --dequantize: new_schemes_cli_test.cpp
  const std::int64_t rows = 48, cols = 256;
  std::mt19937 rng(5u + static_cast<unsigned>(Formula::id));
  const auto x = qpolicy::test::random_bf16(static_cast<std::size_t>(rows * cols), 0.1f, rng);
  const bool swizzled = GENERATE(false, true);
  if (swizzled && f.options != qp::schemes::scale_options::byte_blocks) return;
  std::vector<std::string> flags;
  if (swizzled) flags = {"--scale-layout", "swizzled"};
  const auto q = qpolicy::test::run_quantize_tensor({{"w", st::dtype::BF16, {rows, cols}, std::as_bytes(std::span(x))}}, std::string(f.name), flags);
  // The library's decode of the same parts.
  const auto codes = qpolicy::test::stored_bytes(*q, "w"), scale = qpolicy::test::stored_bytes(*q, "w.scale");
  const auto float_scales = f.scales == qp::schemes::scale_format::f32 ? floats_of(scale) : std::vector<float>();
  const auto second = f.second_suffix.empty() ? std::vector<float>() : floats_of(qpolicy::test::stored_bytes(*q, "w." + std::string(f.second_suffix)));
  const qp::cpu::stored_tensors stored{codes.data(), float_scales.empty() ? static_cast<const void*>(scale.data()) : float_scales.data(),
                                       second.empty() ? nullptr : second.data(), nullptr, rows, cols, swizzled};
  for (const auto& [dtype, element, width] : {std::tuple{"f32", qp::element::f32, 4}, std::tuple{"bf16", qp::element::bf16, 2},
                                              std::tuple{"f16", qp::element::f16, 2}}) {
    INFO(f.name << " --dtype " << dtype << (swizzled ? " swizzled" : ""));
    std::vector<std::uint8_t> want(static_cast<std::size_t>(rows * cols * width));
    qp::cpu::dequantize(Formula::id, stored, element, want.data());
    const auto out = std::filesystem::path(q->path()).replace_extension(std::string(".") + dtype + ".safetensors");
    std::vector<std::string> args{qpolicy::test::required_env("QPOLICY_EXE"), "quantize-tensor", "--key", std::string(f.name), "--dequantize",
                                  "--dtype", dtype, q->path(), "-o", out.string()};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = qpolicy::test::run_process(args);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const st::file decoded(out.string());
    const auto* w = decoded.find("w");
    REQUIRE(w);
    CHECK(w->shape == std::vector<std::int64_t>{rows, cols});
    CHECK(qpolicy::test::stored_bytes(decoded, "w") == want);
  }
}

TEST_CASE("quantize-tensor --dequantize refuses missing and mis-shaped parts, naming them", "[cli][dequantize]") {
  const qpolicy::test::temp_dir dir("dequantize-refusals");
  const auto out = (dir.path() / "out.safetensors").string();
  const auto file = [&](const std::string& name, const std::vector<st::tensor_spec>& specs) {
    const std::string path = (dir.path() / (name + ".safetensors")).string();
    st::file_writer w(path, specs, {});
    for (const auto& s : specs) {
      std::int64_t n = st::size_of(s.type);
      for (const auto d : s.shape) n *= d;
      w.write(std::vector<std::byte>(static_cast<std::size_t>(n)));
    }
    w.finish();
    return path;
  };
  const auto nvfp4 = file("nvfp4", {{"w", st::dtype::U8, {4, 16}}, {"w.scale", st::dtype::F8_E4M3, {4, 2}}});
  const auto fp8 = file("fp8", {{"w", st::dtype::F8_E4M3, {4, 128}}, {"w.scale", st::dtype::F32, {4, 1}}});
  const auto mxfp4 = file("mxfp4", {{"w", st::dtype::U8, {4, 16}}, {"w.scale", st::dtype::U8, {4, 2}}});
  const struct {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"--key", "nvfp4", "--dequantize", nvfp4}, "w.scale_2 must be F32 [1] beside w [4, 16] (nvfp4's stored tensors); it is missing"},
      {{"--key", "fp8_per_block_static", "--dequantize", fp8}, "w.scale must be F32 [1, 1] beside w [4, 128] (fp8_per_block_static's stored "
                                                               "tensors); got F32 [4, 1]"},
      {{"--key", "mxfp4", "--dequantize", mxfp4}, "w.scale must be U8 [4, 1] beside w [4, 16] (mxfp4's stored tensors); got U8 [4, 2]"},
      {{"--key", "fp8_per_token", "--dequantize", "--scale-layout", "col", fp8}, "--scale-layout col and col-tma are not decoded"},
  };
  for (const auto& c : cases) qpolicy::test::check_quantize_tensor_refusal(c.args, 2, c.message, out);
}

TEST_CASE("quantize-tensor --dequantize --device cuda decodes as the CPU does, or says why it cannot", "[cli][dequantize]") {
  const std::int64_t rows = 32, cols = 128;
  std::mt19937 rng(9);
  const auto x = qpolicy::test::random_bf16(static_cast<std::size_t>(rows * cols), 0.1f, rng);
  const auto q = qpolicy::test::run_quantize_tensor({{"w", st::dtype::BF16, {rows, cols}, std::as_bytes(std::span(x))}}, "nvfp4", {});
  const auto decode = [&](const std::string& device) {
    const auto out = std::filesystem::path(q->path()).replace_extension("." + device + ".safetensors").string();
    const auto r = qpolicy::test::run_process({qpolicy::test::required_env("QPOLICY_EXE"), "quantize-tensor", "--key", "nvfp4", "--dequantize",
                                               "--device", device, q->path(), "-o", out});
    return std::tuple{r, out};
  };
  const auto [cpu, cpu_out] = decode("cpu");
  REQUIRE(cpu.status == 0);
  const auto [cuda, cuda_out] = decode("cuda");
  INFO(cuda.err);
  if (qp::cuda::query_devices().count == 0) {
    // No device (or no CUDA in this build): exit 1 with a sentence about CUDA, nothing written.
    CHECK(cuda.status == 1);
    CHECK_THAT(cuda.err, Catch::Contains("CUDA") || Catch::Contains("cuda"));
    CHECK_FALSE(std::filesystem::exists(cuda_out));
  } else {
    REQUIRE(cuda.status == 0);
    CHECK(qpolicy::test::stored_bytes(st::file(cuda_out), "w") == qpolicy::test::stored_bytes(st::file(cpu_out), "w"));
  }
}
