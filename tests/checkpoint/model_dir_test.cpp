// `qpolicy quantize MODEL_DIR -o OUT_DIR`: the output directory's files (shards as the input's or by
// --max-shard-size, the index, config.json with its quantization_config and nothing else changed, the
// plan, the copied files), its tensors equal to the file-mode conversion, and every refusal leaving
// nothing behind. (tests/witness_hf loads these directories in transformers.)
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "../support/checkpoint_fixture.hpp"
#include "../support/files.hpp"
#include "../support/process.hpp"
#include "../support/temp_dir.hpp"
#include "qpolicy/io/checkpoint.hpp"
#include "qpolicy/io/safetensors.hpp"

namespace st = qpolicy::safetensors;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

const std::string config_text = "{\n  \"architectures\": [\"Qwen3MoeForCausalLM\"],\n  \"rms_norm_eps\": 1e-06,\n  \"hidden_size\": 256\n}\n";

using qpolicy::test::slurp;
using qpolicy::test::tree;

using qpolicy::test::spit;

/// A model directory: config.json, the synthetic checkpoint in `shards` files with an index (or one
/// model.safetensors), a tokenizer, a chat template, a subdirectory and PyTorch weights.
fs::path make_model_dir(const fs::path& root, const std::string& name, int shards) {
  const auto d = root / name;
  fs::create_directories(d / "original");
  const auto ts = qpolicy::test::synthetic();
  if (shards == 1) {
    qpolicy::test::write_bf16_checkpoint(ts, (d / "model.safetensors").string());
  } else {
    json::object weight_map;
    const std::size_t per = (ts.size() + shards - 1) / static_cast<std::size_t>(shards);
    for (int s = 0; s < shards; ++s) {
      char file[64];
      std::snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, shards);
      std::vector<qpolicy::test::tensor> part(ts.begin() + static_cast<std::ptrdiff_t>(s * per),
                                              ts.begin() + static_cast<std::ptrdiff_t>(std::min(ts.size(), (s + 1) * per)));
      qpolicy::test::write_bf16_checkpoint(part, (d / file).string());
      for (const auto& t : part) weight_map[t.name] = file;
    }
    spit(d / "model.safetensors.index.json", json::serialize(json::object{{"metadata", json::object{}}, {"weight_map", weight_map}}));
  }
  spit(d / "config.json", config_text);
  spit(d / "tokenizer.json", "{\"model\": {\"type\": \"BPE\"}}");
  spit(d / "chat_template.jinja", "{{ messages }}");
  spit(d / "pytorch_model.bin", "not copied");
  spit(d / "original" / "consolidated.00.pth", "not copied");
  return d;
}

qpolicy::test::process_result run(std::vector<std::string> args) { return qpolicy::test::run_qpolicy(std::move(args)); }

/// Every tensor of an output: name -> bytes, through the files present.
std::map<std::string, std::string> tensors_in(const std::vector<fs::path>& files) {
  std::map<std::string, std::string> out;
  for (const auto& f : files) {
    st::file file(f.string());
    for (const auto& t : file.tensors()) {
      const auto d = file.data(t);
      out[t.name] = std::string(reinterpret_cast<const char*>(d.data()), d.size());
    }
  }
  return out;
}

using qpolicy::test::listing;

}  // namespace

TEST_CASE("quantize writes a model directory: the input's shards, index, config.json, plan and files", "[checkpoint][quantize][dir]") {
  const qpolicy::test::temp_dir tmp("model-dir");
  const auto in = make_model_dir(tmp.path(), "qwen3-small", 3);
  const auto out = tmp.path() / "qwen3-small-fp8";
  ::setenv("QPOLICY_PROGRESS_INTERVAL", "0", 1);  // a progress line after every tensor (stderr is no terminal)
  const auto r = run({"quantize", "-q", "fp8_per_block", in.string(), "-o", out.string()});
  ::unsetenv("QPOLICY_PROGRESS_INTERVAL");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.err, Catch::Contains("progress: ") && Catch::Contains(" MB, 38 of 39 tensors, ") && Catch::Contains(" GB/s, ETA "));
  CHECK_THAT(r.err, Catch::Contains("quantized 32 of 39 tensors (7 copied)"));
  CHECK_THAT(r.err, Catch::Contains("format: vllm-fp8"));
  CHECK_THAT(r.err, Catch::Contains("not copied: the directory 'original'"));
  CHECK_THAT(r.err, Catch::Contains("not copied: 'pytorch_model.bin', weights in another format"));
  CHECK(listing(out) == std::vector<std::string>{"chat_template.jinja", "config.json", "model-00001-of-00003.safetensors",
                                                 "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors",
                                                 "model.safetensors.index.json", "qpolicy_plan.json", "tokenizer.json"});
  CHECK(slurp(out / "tokenizer.json") == slurp(in / "tokenizer.json"));
  CHECK(slurp(out / "chat_template.jinja") == slurp(in / "chat_template.jinja"));

  // config.json: the input's text, byte for byte, with quantization_config added as its last key.
  const auto config = slurp(out / "config.json");
  const auto cut = config_text.rfind('\n', config_text.size() - 3);  // before the closing "}\n"
  CHECK(config.substr(0, cut) == config_text.substr(0, cut));
  const auto qc = json::parse(config).as_object().at("quantization_config").as_object();
  CHECK(qc.at("quant_method") == "fp8");
  CHECK(qc.at("weight_block_size") == json::array{128, 128});
  CHECK(qc.at("ignored_layers") == json::array{"model.layers.0.mlp.gate", "model.layers.1.mlp.gate", "lm_head"});
  CHECK(qc.at("modules_to_not_convert") == qc.at("ignored_layers"));

  // The index: every tensor once, in the shard that holds it; total_size is the tensor bytes.
  const auto index = json::parse(slurp(out / "model.safetensors.index.json")).as_object();
  std::vector<fs::path> shards;
  for (int s = 1; s <= 3; ++s) shards.push_back(out / ("model-0000" + std::to_string(s) + "-of-00003.safetensors"));
  const auto tensors = tensors_in(shards);
  std::uint64_t total = 0;
  for (const auto& [name, bytes] : tensors) total += bytes.size();
  CHECK(index.at("metadata").as_object().at("total_size").to_number<std::uint64_t>() == total);
  const auto& weight_map = index.at("weight_map").as_object();
  CHECK(weight_map.size() == tensors.size());
  for (const auto& shard : shards) {
    st::file f(shard.string());
    for (const auto& t : f.tensors()) CHECK(weight_map.at(t.name).as_string() == shard.filename().string().c_str());
    CHECK(f.metadata().at("qpolicy.plan.model.layers.1.self_attn.qkv_proj") == "fp8_per_block (linear)");
  }
  // A fused layer's shards and an expert's gate/up stay in the file their input was in.
  CHECK(weight_map.at("model.layers.0.self_attn.k_proj.weight_scale_inv") == weight_map.at("model.layers.0.self_attn.k_proj.weight"));

  // The plan, as `qpolicy plan --format json` prints it.
  const auto plan = json::parse(slurp(out / "qpolicy_plan.json")).as_object();
  CHECK(plan.at("layers").as_array().size() > 0);

  // The tensors equal the file-mode conversion of the same checkpoint, byte for byte.
  const auto file_out = tmp.path() / "file-mode.safetensors";
  const auto f = run({"quantize", "-q", "fp8_per_block", (in / "model.safetensors.index.json").string(), "-o", file_out.string()});
  REQUIRE(f.status == 0);
  CHECK(tensors_in({file_out}) == tensors);
}

TEST_CASE("quantize --max-shard-size packs a model directory's tensors into shards", "[checkpoint][quantize][dir]") {
  const qpolicy::test::temp_dir tmp("model-dir-shards");
  const auto in = make_model_dir(tmp.path(), "one-file", 1);
  const auto one = tmp.path() / "one";
  REQUIRE(run({"quantize", "-q", "fp8_per_channel", in.string(), "-o", one.string()}).status == 0);
  // One input file, one output file, no index.
  CHECK(listing(one) == std::vector<std::string>{"chat_template.jinja", "config.json", "model.safetensors", "qpolicy_plan.json",
                                                 "tokenizer.json"});
  const auto all = tensors_in({one / "model.safetensors"});
  const auto out = tmp.path() / "packed";
  const auto r = run({"quantize", "-q", "fp8_per_channel", "--max-shard-size", "600KB", in.string(), "-o", out.string()});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto index = json::parse(slurp(out / "model.safetensors.index.json")).as_object();
  std::vector<fs::path> shards;
  for (const auto& name : listing(out))
    if (name.ends_with(".safetensors")) shards.push_back(out / name);
  REQUIRE(shards.size() > 2);
  for (const auto& s : shards) {
    INFO(s);
    const auto tensors = tensors_in({s});
    std::uint64_t bytes = 0;
    for (const auto& [name, data] : tensors) bytes += data.size();
    CHECK((bytes <= 600000 || tensors.size() == 1));  // a tensor larger than the limit goes alone
    CHECK(s.filename().string().ends_with("-of-0000" + std::to_string(shards.size()) + ".safetensors"));
  }
  CHECK(tensors_in(shards) == all);
  CHECK(index.at("weight_map").as_object().size() == all.size());
}

TEST_CASE("quantize refuses a bad model directory or output directory and leaves nothing", "[checkpoint][quantize][dir]") {
  const qpolicy::test::temp_dir tmp("model-dir-refused");
  const auto good = make_model_dir(tmp.path(), "good", 2);
  const auto fresh = tmp.path() / "out";
  auto refused = [&](const std::vector<std::string>& args, int status, const std::string& message) {
    const auto before = listing(tmp.path());
    const auto r = run(args);
    INFO(r.err);
    CHECK(r.status == status);
    CHECK_THAT(r.err, Catch::Contains(message));
    CHECK(listing(tmp.path()) == before);
    CHECK(listing(good) == std::vector<std::string>{"chat_template.jinja", "config.json", "model-00001-of-00002.safetensors",
                                                    "model-00002-of-00002.safetensors", "model.safetensors.index.json", "original",
                                                    "pytorch_model.bin", "tokenizer.json"});
  };
  const auto q = std::vector<std::string>{"quantize", "-q", "fp8_per_block"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = q;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  // The output: the input itself, a non-empty directory, a file, a missing parent.
  refused(with({good.string(), "-o", good.string()}), 2, "is the model directory");
  refused(with({good.string(), "-o", (good / ".." / "good").string()}), 2, "itself; writing there would destroy the input");
  fs::create_directories(tmp.path() / "full");
  spit(tmp.path() / "full" / "keep.txt", "mine");
  refused(with({good.string(), "-o", (tmp.path() / "full").string()}), 2, "is a directory that is not empty");
  CHECK(slurp(tmp.path() / "full" / "keep.txt") == "mine");
  refused(with({good.string(), "-o", (good / "tokenizer.json").string()}), 2, "exists and is not a directory");
  refused(with({good.string(), "-o", (tmp.path() / "no" / "such" / "dir").string()}), 1, "No such file or directory");
  // The flags that do not fit a directory.
  refused(with({good.string(), "-o", fresh.string(), "--config-out", (tmp.path() / "c.json").string()}), 2,
          "--config-out is for file outputs");
  refused(with({(good / "model.safetensors.index.json").string(), "-o", (tmp.path() / "x.safetensors").string(), "--max-shard-size",
                "1GB"}),
          2, "--max-shard-size applies to a model directory");
  refused(with({good.string(), "-o", fresh.string(), "--max-shard-size", "lots"}), 1,
          "--max-shard-size must be a positive size such as 5GB, 500MB, 2GiB or a number of bytes, got 'lots'");
  refused(with({good.string(), "-o", fresh.string(), "--format", "gguf"}), 1, "--format must be vllm-fp8 or compressed-tensors, got 'gguf'");
  // Formats that cannot express the plan.
  refused({"quantize", "-q", "fp8_per_channel", "--format", "vllm-fp8", good.string(), "-o", fresh.string()}, 2,
          "which --format vllm-fp8 cannot express (vLLM's fp8 checkpoint method has no per-channel weights); --format "
          "compressed-tensors can");
  refused({"quantize", "-q", "online", "-c", R"({"linear": "fp8_per_block", "moe": "fp8_per_tensor"})", "--format", "vllm-fp8",
           good.string(), "-o", fresh.string()},
          2, "the plan mixes 2 schemes, which --format vllm-fp8 cannot express");

  // Directories that are no model.
  auto variant = [&](const std::string& name, auto&& change) {
    const auto d = make_model_dir(tmp.path(), name, 1);
    change(d);
    return d;
  };
  const auto no_config = variant("no-config", [](const fs::path& d) { fs::remove(d / "config.json"); });
  refused(with({no_config.string(), "-o", fresh.string()}), 2, "has no config.json; expected a Hugging Face model directory");
  const auto quantized = variant("quantized", [](const fs::path& d) {
    spit(d / "config.json", R"({"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}})");
  });
  // A quantization_config whose format the tensors do not follow (bf16 weights where fp8 stores F8_E4M3).
  refused({"quantize", "-c", R"({"linear": "fp8_per_block"})", quantized.string(), "-o", fresh.string()}, 2,
          "the checkpoint's fp8, per-tensor scale stores model.layers.0.self_attn.q_proj as weight F8_E4M3 [N, K], weight_scale F32 [1] or []; "
          "tensor 'model.layers.0.self_attn.q_proj.weight' is BF16 [256, 256]");
  const auto list = variant("list", [](const fs::path& d) { spit(d / "config.json", "[1, 2]"); });
  refused(with({list.string(), "-o", fresh.string()}), 2, "config.json is a JSON list; expected an object");
  const auto broken = variant("broken", [](const fs::path& d) { spit(d / "config.json", "{\"a\": "); });
  refused(with({broken.string(), "-o", fresh.string()}), 2, "invalid JSON");
  const auto both = variant("both", [](const fs::path& d) { spit(d / "model.safetensors.index.json", R"({"weight_map": {}})"); });
  refused(with({both.string(), "-o", fresh.string()}), 2, "has both model.safetensors and model.safetensors.index.json");
  const auto bin = variant("bin", [](const fs::path& d) { fs::remove(d / "model.safetensors"); });
  refused(with({bin.string(), "-o", fresh.string()}), 2, "it has PyTorch .bin weights, and quantize reads safetensors");
  const auto truncated = variant("truncated", [](const fs::path& d) {
    fs::resize_file(d / "model.safetensors", fs::file_size(d / "model.safetensors") - 100);
  });
  refused(with({truncated.string(), "-o", fresh.string()}), 2, "truncated");
}

TEST_CASE("a model directory whose writes fail midway keeps its complete shards, and --resume finishes it",
          "[checkpoint][quantize][dir]") {
  const qpolicy::test::temp_dir tmp("model-dir-efbig");
  const auto in = make_model_dir(tmp.path(), "model", 2);
  spit(in / "tokenizer.json", std::string(4 << 20, 'x'));  // copied after the shards are complete
  const auto out = tmp.path() / "out", fresh = tmp.path() / "fresh";
  const char* exe = std::getenv("QPOLICY_EXE");
  REQUIRE(exe);
  // A file size limit (ulimit -f, 512-byte blocks: 2 MiB) that every shard fits under and the
  // tokenizer does not: the write fails after both shards were committed.
  const auto r = qpolicy::test::run_process(
      {"/bin/sh", "-c", "ulimit -f 4096 && exec \"$@\"", "sh", exe, "quantize", "-q", "fp8_per_tensor", in.string(), "-o", out.string()});
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Catch::Contains("tokenizer.json': File too large") && Catch::Contains("--resume finishes it"));
  // Nothing looks complete: no config.json, no index, no temporaries; the shards have manifests (the
  // copied files come before the index and config.json, the chat template among them).
  const auto left = listing(out);
  CHECK(left == std::vector<std::string>{".qpolicy", "chat_template.jinja", "model-00001-of-00002.safetensors",
                                         "model-00002-of-00002.safetensors"});
  CHECK(listing(out / ".qpolicy") == std::vector<std::string>{"lock", "model-00001-of-00002.safetensors.json",
                                                              "model-00002-of-00002.safetensors.json", "run.json"});
  // A plain run refuses the unfinished directory; other options are refused even with --resume.
  const auto plain = run({"quantize", "-q", "fp8_per_tensor", in.string(), "-o", out.string()});
  CHECK(plain.status == 2);
  CHECK_THAT(plain.err, Catch::Contains("holds an unfinished conversion of this model with these options; --resume finishes it"));
  const auto other = run({"quantize", "-q", "fp8_per_block", "--resume", in.string(), "-o", out.string()});
  CHECK(other.status == 2);
  CHECK_THAT(other.err, Catch::Contains("holds an unfinished conversion with other inputs or options"));
  // A damaged run.json (truncated, or a field gone) is bad input: exit 2 naming the file, and the
  // directory stays as it was for a repaired --resume.
  {
    const auto run_json = out / ".qpolicy" / "run.json";
    const auto saved = slurp(run_json);
    const auto before = tree(out);
    const auto cut = saved.find("\"run_id\"");
    REQUIRE(cut != std::string::npos);
    std::string without_run_id("{");  // not "{" + string: GCC 12 warns about that (a false -Wrestrict)
    without_run_id.append(saved.substr(saved.find(',', cut) + 1));
    for (const auto& damaged : {saved.substr(0, saved.size() / 2), without_run_id}) {
      spit(run_json, damaged);
      const auto bad = run({"quantize", "-q", "fp8_per_tensor", "--resume", in.string(), "-o", out.string()});
      CHECK(bad.status == 2);
      CHECK_THAT(bad.err, Catch::Contains(run_json.string()));
      CHECK_THAT(bad.err, Catch::Contains("damaged: no \"run_id\" string") || Catch::Contains("invalid JSON in"));
      const auto finalize = run({"quantize", "--finalize", out.string()});
      CHECK(finalize.status == 2);
      CHECK_THAT(finalize.err, Catch::Contains(run_json.string()));
    }
    spit(run_json, saved);
    CHECK(tree(out) == before);
  }
  // --resume keeps both shards and finishes: the same directory as a run that never failed.
  const auto resumed = run({"quantize", "-q", "fp8_per_tensor", "--resume", in.string(), "-o", out.string()});
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  CHECK_THAT(resumed.err, Catch::Contains("wrote 0 of 2 shards") && Catch::Contains("kept 2 complete ones") && Catch::Contains("finished"));
  REQUIRE(run({"quantize", "-q", "fp8_per_tensor", in.string(), "-o", fresh.string()}).status == 0);
  CHECK(tree(out) == tree(fresh));
  CHECK_FALSE(fs::exists(out / ".qpolicy"));
  // Running the finished conversion again changes nothing.
  const auto again = run({"quantize", "-q", "fp8_per_tensor", "--resume", in.string(), "-o", out.string()});
  CHECK(again.status == 0);
  CHECK_THAT(again.err, Catch::Contains("is finished already"));
  CHECK(tree(out) == tree(fresh));
}

TEST_CASE("quantize --shard I/N processes write one directory together, the same as one process", "[checkpoint][quantize][dir]") {
  const qpolicy::test::temp_dir tmp("model-dir-sharded");
  const auto in = make_model_dir(tmp.path(), "model", 1);
  const auto single = tmp.path() / "single", shared = tmp.path() / "shared", manual = tmp.path() / "manual";
  const std::vector<std::string> args{"quantize", "-q", "fp8_per_block", "--max-shard-size", "300KB", in.string()};
  auto with = [&](std::vector<std::string> extra) {
    auto a = args;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  REQUIRE(run(with({"-o", single.string()})).status == 0);
  const char* exe = std::getenv("QPOLICY_EXE");
  // Three processes at once; the last to finish completes the directory.
  std::vector<qpolicy::test::running_process> procs;
  for (int i = 0; i < 3; ++i) {
    auto a = with({"-o", shared.string(), "--shard", std::to_string(i) + "/3"});
    a.insert(a.begin(), exe);
    procs.push_back(qpolicy::test::start_process(a));
  }
  int finished = 0;
  for (auto& p : procs) {
    const auto r = qpolicy::test::finish_process(p, 120);
    INFO(r.err);
    CHECK(r.status == 0);
    finished += r.err.find("finished '") != std::string::npos;
  }
  CHECK(finished == 1);
  CHECK(tree(shared) == tree(single));
  // One at a time, the last not run yet: --finalize says what is missing; after it, --finalize completes.
  REQUIRE(run(with({"-o", manual.string(), "--shard", "0/3"})).status == 0);
  REQUIRE(run(with({"-o", manual.string(), "--shard", "2/3"})).status == 0);
  CHECK_FALSE(fs::exists(manual / "config.json"));
  const auto early = run({"quantize", "--finalize", manual.string()});
  CHECK(early.status == 2);
  CHECK_THAT(early.err, Catch::Contains("is not complete: ") && Catch::Contains(" shards are missing or unfinished (model-00002-of-"));
  auto last = with({"-o", manual.string(), "--shard", "1/3"});
  REQUIRE(run(last).status == 0);  // the last process finishes it
  CHECK(tree(manual) == tree(single));
  const auto done = run({"quantize", "--finalize", manual.string()});
  CHECK(done.status == 0);
  CHECK_THAT(done.err, Catch::Contains("is finished already"));
  // Bad values.
  for (const auto& bad : {"3/3", "1/0", "x/2", "1", "-1/2", "1/2/3"}) {
    const auto r = run(with({"-o", (tmp.path() / "bad").string(), "--shard", bad}));
    INFO(bad << ": " << r.err);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::Contains("--shard must be I/N with 0 <= I < N <= 65536"));
  }
  const auto lone = run({"quantize", "--finalize", (tmp.path() / "nothing").string()});
  CHECK(lone.status != 0);
  const auto extra = run({"quantize", "--finalize", manual.string(), "-q", "fp8_per_block"});
  CHECK(extra.status == 1);
  CHECK_THAT(extra.err, Catch::Contains("--finalize OUT_DIR takes nothing else"));
}

TEST_CASE("parse_byte_size reads sizes as transformers' max_shard_size does", "[unit][quantize]") {
  using qpolicy::parse_byte_size;
  CHECK(parse_byte_size("5GB") == 5'000'000'000ull);
  CHECK(parse_byte_size("500MB") == 500'000'000ull);
  CHECK(parse_byte_size("2GiB") == 2ull << 30);
  CHECK(parse_byte_size("10kib") == 10240ull);
  CHECK(parse_byte_size("8Gb") == 1'000'000'000ull);  // a lowercase b: bits
  CHECK(parse_byte_size("123") == 123ull);
  CHECK(parse_byte_size("18446744073709551615") == 18446744073709551615ull);
  for (const char* bad : {"", "0", "GB", "5 GB", "5TB", "-5GB", "1.5GB", "18446744073709551616", "20000000000GB", "5GBs"}) {
    INFO(bad);
    CHECK_FALSE(parse_byte_size(bad));
  }
}
