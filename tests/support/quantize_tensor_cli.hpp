#pragma once
// Driving `qpolicy quantize-tensor` from a test: the inputs written to a safetensors file, the command
// run on it (QPOLICY_EXE), its output opened, and a stored tensor's bytes read back.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "process.hpp"
#include "temp_dir.hpp"
#include "test_inputs.hpp"
#include "qpolicy/io/safetensors.hpp"

namespace qpolicy::test {

/// One tensor of the input file.
struct cli_input {
  std::string name;
  safetensors::dtype type;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes;
};

/// Writes `inputs` to a safetensors file, runs `qpolicy quantize-tensor --key KEY IN -o OUT FLAGS...`,
/// requires exit status 0 and opens OUT. The files live until the test program ends (the returned
/// file maps its output).
inline std::unique_ptr<safetensors::file> run_quantize_tensor(const std::vector<cli_input>& inputs, const std::string& key,
                                                              const std::vector<std::string>& flags) {
  namespace st = qpolicy::safetensors;
  static const temp_dir scratch("cli");
  static int runs = 0;
  const auto tag = std::to_string(runs++);
  const auto in = (scratch.path() / (tag + "_in.safetensors")).string();
  const auto out = (scratch.path() / (tag + "_out.safetensors")).string();
  std::vector<st::tensor_spec> specs;
  for (const auto& t : inputs) specs.push_back({t.name, t.type, t.shape});
  st::file_writer w(in, specs, {});
  for (const auto& t : inputs) w.write(t.bytes);
  w.finish();
  std::vector<std::string> args{required_env("QPOLICY_EXE"), "quantize-tensor", "--key", key, in, "-o", out};
  args.insert(args.end(), flags.begin(), flags.end());
  const auto r = run_process(args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return std::make_unique<st::file>(out);
}

/// Runs `qpolicy quantize-tensor ARGS... -o OUT` and requires a refusal: exit `status`, `message` on
/// stderr, and no OUT written.
inline void check_quantize_tensor_refusal(const std::vector<std::string>& args, int status, const std::string& message,
                                          const std::string& out) {
  std::vector<std::string> all{required_env("QPOLICY_EXE"), "quantize-tensor"};
  all.insert(all.end(), args.begin(), args.end());
  all.insert(all.end(), {"-o", out});
  const auto r = run_process(all);
  INFO(message << "\n" << r.err);
  CHECK(r.status == status);
  CHECK_THAT(r.err, Catch::Contains(message));
  CHECK_FALSE(std::filesystem::exists(out));
}

/// The bytes of stored tensor `name` (which must exist).
inline std::vector<std::uint8_t> stored_bytes(const safetensors::file& f, const std::string& name) {
  const auto* t = f.find(name);
  INFO("tensor " << name);
  REQUIRE(t);
  const auto d = f.data(*t);
  return {reinterpret_cast<const std::uint8_t*>(d.data()), reinterpret_cast<const std::uint8_t*>(d.data()) + d.size()};
}

}  // namespace qpolicy::test
