// safetensors reader and writer: round trips, every way a file can be broken, no half-written output,
// and the Python `safetensors` package as an outside witness when it is installed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "../support/process.hpp"
#include "qpolicy/io/io_error.hpp"
#include "qpolicy/io/safetensors.hpp"
#include "../support/temp_dir.hpp"

namespace st = qpolicy::safetensors;
namespace fs = std::filesystem;

namespace {

/// This process's scratch directory, removed when the tests end.
fs::path scratch_dir() {
  static const qpolicy::test::temp_dir dir("st");
  return dir.path();
}

std::span<const std::byte> bytes_of(const std::vector<std::uint8_t>& v) {
  return {reinterpret_cast<const std::byte*>(v.data()), v.size()};
}

/// A raw file: 8-byte length, header text, then `data_size` bytes.
std::string raw_file(const std::string& name, const std::string& header, std::size_t data_size,
                     std::uint64_t claimed_length = ~0ull) {
  const auto path = (scratch_dir() / name).string();
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t n = claimed_length == ~0ull ? header.size() : claimed_length;
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(n >> (8 * i)));
  out << header << std::string(data_size, '\x01');
  return path;
}

std::string error_of(const std::string& path) {
  try {
    st::file f(path);
  } catch (const qpolicy::config_error& e) {
    return e.what();
  } catch (const qpolicy::io_error& e) {
    return std::string("io_error: ") + e.what();
  }
  return "(no error)";
}

/// A python3 with safetensors and numpy, or "".
std::string python_with_safetensors() {
  static const std::string found = [] {
    // The test environment's witness (scripts/install-deps.sh sets it up), then any python3 on PATH.
    if (const char* p = std::getenv("QPOLICY_PYTHON"); p && fs::exists(p) &&
        qpolicy::test::run_process({p, "-c", "import safetensors, numpy"}).status == 0)
      return std::string(p);
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin";
    for (std::size_t at = 0; at <= dirs.size();) {
      const auto end = std::min(dirs.find(':', at), dirs.size());
      const auto py = fs::path(dirs.substr(at, end - at)) / "python3";
      at = end + 1;
      if (!fs::exists(py)) continue;
      if (qpolicy::test::run_process({py.string(), "-c", "import safetensors, numpy"}).status == 0) return py.string();
    }
    return std::string();
  }();
  return found;
}

}  // namespace

TEST_CASE("safetensors: write, read back, metadata and bytes", "[unit][safetensors]") {
  const auto path = (scratch_dir() / "round.safetensors").string();
  std::vector<std::uint8_t> a(2 * 3 * 2), b(5), c;
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint8_t>(i * 7);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(200 + i);
  {
    st::file_writer w(path, {{"layer.weight", st::dtype::BF16, {2, 3}}, {"layer.weight_scale", st::dtype::F8_E4M3, {5}},
                        {"empty", st::dtype::F32, {0, 4}}},
                 {{"qpolicy.plan", "{}"}});
    w.write(bytes_of(a).subspan(0, 5));  // pieces may split a tensor anywhere
    w.write(bytes_of(a).subspan(5));
    w.write(bytes_of(b));
    w.finish();
  }
  st::file f(path);
  REQUIRE(f.tensors().size() == 3);
  CHECK(f.metadata().at("qpolicy.plan") == "{}");
  const auto* t = f.find("layer.weight");
  REQUIRE(t);
  CHECK(t->type == st::dtype::BF16);
  CHECK(t->shape == std::vector<std::int64_t>{2, 3});
  const auto d = f.data(*t);
  REQUIRE(d.size() == a.size());
  CHECK(std::memcmp(d.data(), a.data(), a.size()) == 0);
  CHECK(f.find("empty")->elements() == 0);
  CHECK(f.data(*f.find("layer.weight_scale"))[4] == std::byte{204});
}

TEST_CASE("safetensors: an unfinished writer leaves nothing behind", "[unit][safetensors]") {
  const auto path = (scratch_dir() / "unfinished.safetensors").string();
  {
    st::file_writer w(path, {{"x", st::dtype::U8, {4}}}, {});
    w.write(bytes_of(std::vector<std::uint8_t>{1, 2}));
    CHECK_THROWS_WITH(w.finish(), Catch::Contains("'x' was not written completely"));
  }
  CHECK_FALSE(fs::exists(path));
  for (const auto& e : fs::directory_iterator(scratch_dir()))
    CHECK(e.path().filename().string().find("unfinished.safetensors.qpolicy-tmp-") == std::string::npos);
  st::file_writer w(path, {{"x", st::dtype::U8, {1}}}, {});
  CHECK_THROWS_WITH(w.write(bytes_of(std::vector<std::uint8_t>{1, 2})), Catch::Contains("more data written"));
}

TEST_CASE("safetensors: broken and hostile files are refused with a clear reason", "[unit][safetensors]") {
  const std::string ok_entry = R"("t": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]})";
  {
    const auto path = (scratch_dir() / "tiny").string();
    std::ofstream(path, std::ios::binary) << "abc";
    CHECK_THAT(error_of(path), Catch::Contains("fewer than the 8 of the header length"));
  }
  CHECK_THAT(error_of(raw_file("len", "{" + ok_entry + "}", 2, 1u << 20)), Catch::Contains("(the file is truncated)"));
  CHECK_THAT(error_of(raw_file("huge", "{}", 0, 1ull << 40)), Catch::Contains("exceeds the 100 MiB limit"));
  CHECK_THAT(error_of(raw_file("notjson", "[1, 2]", 0)), Catch::Contains("must start with '{'"));
  CHECK_THAT(error_of(raw_file("badjson", "{\"t\": ", 0)), Catch::Contains("invalid JSON"));
  CHECK_THAT(error_of(raw_file("dtype", R"({"t": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}})", 16)),
             Catch::Contains("dtype 'F128'; expected one of BOOL"));
  CHECK_THAT(error_of(raw_file("mismatch", R"({"t": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 20)),
             Catch::Contains("shape [2, 3] of F32 needs 24 bytes, but data_offsets span 20"));
  CHECK_THAT(error_of(raw_file("past", R"({"t": {"dtype": "U8", "shape": [9], "data_offsets": [0, 9]}})", 4)),
             Catch::Contains("ends at byte 9 of a data section of 4 bytes"));
  CHECK_THAT(error_of(raw_file("overlap", R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                            "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})", 6)),
             Catch::Contains("overlaps the tensor before it"));
  CHECK_THAT(error_of(raw_file("gap", R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]}})", 4)),
             Catch::Contains("belong to no tensor"));
  CHECK_THAT(error_of(raw_file("trailing", "{" + ok_entry + "}", 5)), Catch::Contains("3 bytes after the last tensor"));
  CHECK_THAT(error_of(raw_file("dup", "{" + ok_entry + ", " + ok_entry + "}", 2)), Catch::Contains("names 't' twice"));
  CHECK_THAT(error_of(raw_file("neg", R"({"t": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}})", 0)),
             Catch::Contains("negative dimension"));
  CHECK_THAT(error_of(raw_file("overflow", R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 0]}})", 0)),
             Catch::Contains("has more elements than a 64-bit size can count"));
  CHECK_THAT(error_of(raw_file("inf", R"({"t": {"dtype": "F16", "shape": [4e400], "data_offsets": [0, 0]}})", 0)),
             Catch::Contains("not an integer: inf"));
  CHECK_THAT(error_of(raw_file("meta", R"({"__metadata__": {"k": 1}})", 0)), Catch::Contains("__metadata__['k'] must be a string"));
  CHECK_THAT(error_of(raw_file("order", R"({"t": {"dtype": "U8", "shape": [0], "data_offsets": [3, 1]}})", 3)),
             Catch::Contains("out of order"));
  CHECK_THAT(error_of((scratch_dir() / "missing").string()), Catch::Contains("io_error: cannot read the input") &&
                                                            Catch::Contains("No such file or directory"));
}

TEST_CASE("safetensors: files agree with the Python safetensors package", "[unit][safetensors][witness]") {
  const auto python = python_with_safetensors();
  if (python.empty()) {
    WARN("python3 with safetensors and numpy is not installed: the outside witness is skipped");
    return;
  }
  const auto ours = (scratch_dir() / "ours.safetensors").string(), theirs = (scratch_dir() / "theirs.safetensors").string();
  std::vector<std::uint8_t> w(3 * 4 * 2);
  std::mt19937 rng(3);
  for (auto& x : w) x = static_cast<std::uint8_t>(rng());
  {
    st::file_writer out(ours, {{"w", st::dtype::BF16, {3, 4}}, {"s", st::dtype::F32, {1}}, {"h", st::dtype::F16, {2}}},
                   {{"m", "v"}});
    out.write(bytes_of(w));
    out.write(bytes_of(std::vector<std::uint8_t>{0, 0, 0x80, 0x3f}));
    out.write(bytes_of(std::vector<std::uint8_t>{0x00, 0x3c, 0x00, 0xc0}));  // 1.0, -2.0
    out.finish();
  }
  const std::string script =
      "import sys, numpy as np\n"
      "from safetensors.numpy import load_file, save_file\n"
      "from safetensors import safe_open\n"
      "with safe_open(sys.argv[1], 'np') as f:\n"
      "    assert f.metadata() == {'m': 'v'}, f.metadata()\n"
      "    assert f.get_slice('w').get_dtype() == 'BF16' and f.get_slice('w').get_shape() == [3, 4]\n"
      "    assert f.get_tensor('s').tolist() == [1.0] and f.get_tensor('h').tolist() == [1.0, -2.0]\n"
      "save_file({'a': np.arange(6, dtype=np.int32).reshape(2, 3), 'b': np.ones(3, dtype=np.float32)}, sys.argv[2], metadata={'k': 'x'})\n";
  const auto r = qpolicy::test::run_process({python, "-c", script, ours, theirs});
  INFO(r.err);
  REQUIRE(r.status == 0);
  st::file f(theirs);
  REQUIRE(f.find("a"));
  CHECK(f.find("a")->type == st::dtype::I32);
  CHECK(f.find("a")->shape == std::vector<std::int64_t>{2, 3});
  std::int32_t v[6];
  std::memcpy(v, f.data(*f.find("a")).data(), sizeof v);
  CHECK(v[5] == 5);
  CHECK(f.metadata().at("k") == "x");
}
