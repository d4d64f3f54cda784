// Hostile suite, paths: outputs that alias inputs or each other, outputs that are not regular files,
// inputs that are not regular files, and every I/O failure with exit 1 and nothing left behind.
#include <unistd.h>

#include "hostile.hpp"

using namespace hostile;

TEST_CASE("an output that is an input is refused before any work", "[hostile][paths]") {
  temp_dir d("hostile-alias");
  const auto in = d / "model.safetensors";
  write_file(in, small_checkpoint());
  fs::create_symlink(in, d / "link.safetensors");
  fs::create_hard_link(in, d / "hard.safetensors");
  const auto model = d / "model.json", config = d / "policy.json";
  write_file(model, R"({"layers": [{"name": "lm_head", "class": "ParallelLMHead", "kind": "other"}]})");
  write_file(config, R"({"linear": "fp8_per_block"})");
  const auto before = list(d.path());
  struct alias {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<alias> cases{
      {{"quantize", "-q", "fp8_per_block", "-o", in, in}, "-o '" + in + "' is the same file as the input '" + in + "'"},
      {{"quantize", "-q", "fp8_per_block", "-o", d / "link.safetensors", in}, "is the same file as the input"},
      {{"quantize", "-q", "fp8_per_block", "-o", d / "hard.safetensors", in}, "is the same file as the input"},
      {{"quantize", "-q", "fp8_per_block", "-o", d / "out.safetensors", "--config-out", in, in}, "--config-out '" + in + "' is the same file as the input"},
      {{"quantize", "-q", "fp8_per_block", "-o", d / "out.safetensors", "--config-out", d / "out.safetensors", in},
       "--config-out '" + (d / "out.safetensors") + "' is the same file as -o"},
      {{"quantize", "-q", "fp8_per_block", "--model", model, "-o", model, in}, "is the same file as the model file"},
      {{"quantize", "-c", "@" + config, "-o", d / "o.safetensors", "--config-out", config, in},
       "is the same file as the quantization_config file"},
      {{"quantize-tensor", "--key", "fp8_per_token", in, "-o", in}, "-o '" + in + "' is the same file as the input"},
      {{"quantize-tensor", "--key", "fp8_per_token", in, "-o", d / "hard.safetensors"}, "is the same file as the input"},
  };
  for (const auto& c : cases) {
    INFO(Catch::Detail::stringify(c.args));
    check_refused(run_qpolicy(c.args), 2, c.message, d.path(), before);
  }
}

TEST_CASE("an output that exists and is not a regular file is refused", "[hostile][paths]") {
  temp_dir d("hostile-special");
  const auto in = d / "model.safetensors";
  write_file(in, small_checkpoint());
  REQUIRE(::mkfifo((d / "fifo").c_str(), 0644) == 0);
  fs::create_symlink("/dev/null", d / "null");  // renaming onto the link would be harmless; writing through it is not the point
  fs::create_directory(d / "dir");
  const auto before = list(d.path());
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", d / "fifo", in}), 2, "-o '" + (d / "fifo") + "' is a FIFO", d.path(), before);
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", d / "null", in}), 2, "is a character device", d.path(), before);
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", d / "dir", in}), 2, "is a directory; expected a file path", d.path(), before);
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", d / "out.safetensors", "--config-out", d / "fifo", in}), 2,
                "--config-out '" + (d / "fifo") + "' is a FIFO", d.path(), before);
  check_refused(run_qpolicy({"quantize-tensor", "--key", "fp8_per_token", in, "-o", d / "dir"}), 2, "is a directory", d.path(), before);
}

TEST_CASE("an input that is a FIFO, a device or a directory is refused without blocking", "[hostile][paths]") {
  temp_dir d("hostile-inputs");
  REQUIRE(::mkfifo((d / "fifo").c_str(), 0644) == 0);
  fs::create_directory(d / "dir");
  write_file(d / "model.safetensors", small_checkpoint());
  const auto before = list(d.path());
  const auto out = d / "out.safetensors";
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, d / "fifo"}, 20), 2, "the input '" + (d / "fifo") + "' is a FIFO; expected a regular file",
                d.path(), before);
  check_refused(run_qpolicy({"quantize-tensor", "--key", "fp8_per_token", d / "fifo", "-o", out}, 20), 2, "is a FIFO", d.path(), before);
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, "/dev/zero"}, 20), 2, "'/dev/zero' is a character device", d.path(), before);
  check_refused(run_qpolicy({"plan", "-q", "fp8_per_tensor", "--model", d / "fifo"}, 20), 2, "the model file '" + (d / "fifo") + "' is a FIFO", d.path(), before);
  check_refused(run_qpolicy({"resolve", "-c", "@" + (d / "fifo")}, 20), 2, "is a FIFO", d.path(), before);
  check_refused(run_qpolicy({"plan", "-q", "fp8_per_tensor", "--model", d / "dir"}), 2, "the model file '" + (d / "dir") + "' is a directory; expected a regular file",
                d.path(), before);
  check_refused(run_qpolicy({"resolve", "-c", "@" + (d / "dir")}), 2, "the quantization_config file '" + (d / "dir") + "' is a directory", d.path(), before);
  // A directory input is a model directory: this one has no config.json.
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, d / "dir"}), 2, "has no config.json; expected a Hugging Face model directory",
                d.path(), before);
}

TEST_CASE("I/O failures exit 1 naming the path and the reason, and leave nothing", "[hostile][paths][io]") {
  temp_dir d("hostile-io");
  const auto in = d / "model.safetensors";
  write_file(in, small_checkpoint());
  write_file(d / "model.safetensors.index.json", R"({"weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors"}})");
  const auto before = list(d.path());
  const auto out = d / "out.safetensors";
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, d / "missing.safetensors"}), 1,
                "cannot read the input '" + (d / "missing.safetensors") + "': No such file or directory", d.path(), before);
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, d / "model.safetensors.index.json"}), 1,
                "model-00002-of-00002.safetensors': No such file or directory", d.path(), before);
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, d / "absent.safetensors.index.json"}), 1,
                "cannot read the checkpoint index '" + (d / "absent.safetensors.index.json") + "': No such file or directory", d.path(), before);
  check_refused(run_qpolicy({"quantize-tensor", "--key", "fp8_per_token", d / "missing.safetensors", "-o", out}), 1,
                "No such file or directory", d.path(), before);
  check_refused(run_qpolicy({"plan", "-q", "fp8_per_tensor", "--model", d / "missing.json"}), 1,
                "cannot read the model file '" + (d / "missing.json") + "': No such file or directory", d.path(), before);
  // A missing output directory, for the checkpoint and for the config file (which used to be written
  // after the checkpoint was already in place).
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", d / "no/such/dir/out.safetensors", in}), 1,
                "its directory '" + (d / "no/such/dir") + "': No such file or directory", d.path(), before);
  check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, "--config-out", d / "nodir/quant_config.json", in}), 1,
                "cannot create --config-out '" + (d / "nodir/quant_config.json") + "': its directory", d.path(), before);
  if (::geteuid() == 0) {
    WARN("running as root: the unreadable-file and read-only-directory cases are skipped (root bypasses permissions)");
  } else {
    fs::permissions(in, fs::perms::none);
    check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", out, in}), 1, "Permission denied", d.path(), list(d.path()));
    fs::permissions(in, fs::perms::owner_read | fs::perms::owner_write);
    temp_dir ro("hostile-ro");
    fs::permissions(ro.path(), fs::perms::owner_read | fs::perms::owner_exec);
    check_refused(run_qpolicy({"quantize", "-q", "fp8_per_tensor", "-o", ro / "out.safetensors", in}), 1, "Permission denied", d.path(), list(d.path()));
    fs::permissions(ro.path(), fs::perms::owner_all);
  }
}

TEST_CASE("a write over the file size limit is an I/O error (EFBIG), exit 1, no temporaries", "[hostile][paths][io]") {
  temp_dir d("hostile-fsize");
  std::string data;
  for (int i = 0; i < 512 * 512; ++i) data += std::string{static_cast<char>(i % 97), 0x3e};
  const auto in = d / "big.safetensors";
  write_file(in, safetensors(R"({"x.weight": {"dtype": "BF16", "shape": [512, 512], "data_offsets": [0, 524288]}})", data));
  const auto before = list(d.path());
  // The input is 512 KiB; the FP8 output needs 256 KiB: a 64 KiB limit stops it midway.
  check_refused(qpolicy_with_size_limit(64, {"quantize", "-q", "fp8_per_tensor", "-o", d / "out.safetensors", "--config-out",
                                             d / "quant_config.json", in}),
                1, "cannot write '" + (d / "out.safetensors") + "': File too large", d.path(), before);
  check_refused(qpolicy_with_size_limit(64, {"quantize-tensor", "--key", "fp8_per_token", in, "-o", d / "out.safetensors"}), 1,
                "File too large", d.path(), before);
}
