// `qpolicy quantize` end to end on a synthetic checkpoint with Qwen3-30B-A3B's names and structure at
// small sizes: every weight's codes and scales against the CPU reference, copies byte for byte, the
// plan in __metadata__, the quantization_config block, and bad inputs refused with no output.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "../support/checkpoint_fixture.hpp"
#include "../support/random_operands.hpp"
#include "qpolicy/kernels/cpu/reference.hpp"
#include "../support/files.hpp"
#include "../support/process.hpp"
#include "qpolicy/io/safetensors.hpp"
#include "../support/temp_dir.hpp"

namespace st = qpolicy::safetensors;
namespace fp8 = qpolicy::fp8;
namespace ref = qpolicy::cpu::reference;
namespace fs = std::filesystem;

namespace {

/// This process's scratch directory, removed when the tests end.
fs::path dir() {
  static const qpolicy::test::temp_dir d("ckpt");
  return d.path();
}

using qpolicy::test::synthetic;
using qpolicy::test::tensor;

std::string write_checkpoint(const std::vector<tensor>& ts, const std::string& name) {
  const auto path = (dir() / name).string();
  qpolicy::test::write_bf16_checkpoint(ts, path);
  return path;
}

qpolicy::test::process_result quantize(const std::vector<std::string>& extra) {
  const char* exe = std::getenv("QPOLICY_EXE");
  REQUIRE(exe);
  std::vector<std::string> args{exe, "quantize"};
  args.insert(args.end(), extra.begin(), extra.end());
  return qpolicy::test::run_process(args);
}

qpolicy::input_view view(const tensor& t) { return {t.bf16.data(), qpolicy::element::bf16, t.shape[0], t.shape[1]}; }

void check_tensor(const st::file& f, const std::string& name, const std::vector<std::uint8_t>& codes,
                  const std::string& scale_name, const std::vector<float>& scales) {
  INFO(name);
  const auto* q = f.find(name);
  REQUIRE(q);
  CHECK(q->type == st::dtype::F8_E4M3);
  const auto d = f.data(*q);
  REQUIRE(d.size() == codes.size());
  CHECK(std::memcmp(d.data(), codes.data(), codes.size()) == 0);
  const auto* s = f.find(scale_name);
  REQUIRE(s);
  CHECK(s->type == st::dtype::F32);
  const auto sd = f.data(*s);
  REQUIRE(sd.size() == scales.size() * 4);
  CHECK(std::memcmp(sd.data(), scales.data(), sd.size()) == 0);
}

using qpolicy::test::slurp;

}  // namespace

TEST_CASE("qpolicy quantize converts a Qwen3-30B-A3B-shaped checkpoint for each FP8 scheme", "[checkpoint][quantize]") {
  const auto ts = synthetic();
  std::map<std::string, const tensor*> by;
  for (const auto& t : ts) by[t.name] = &t;
  const auto in = write_checkpoint(ts, "qwen3-small.safetensors");
  for (const std::string scheme : {"fp8_per_tensor", "fp8_per_block", "fp8_per_channel"}) {
    INFO(scheme);
    const auto out = (dir() / (scheme + ".safetensors")).string(), cfg = (dir() / (scheme + ".json")).string();
    const auto r = quantize({"-q", scheme, "-o", out, "--config-out", cfg, "--threads", "2", in});
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.err, Catch::Contains("derived"));
    st::file f(out);
    CHECK(f.metadata().at("qpolicy.plan.model.layers.1.self_attn.qkv_proj") == scheme + " (linear)");
    for (const auto* copied : {"model.embed_tokens.weight", "model.layers.0.mlp.gate.weight", "model.norm.weight",
                               "lm_head.weight", "model.layers.1.input_layernorm.weight"}) {
      const auto* t = f.find(copied);
      REQUIRE(t);
      CHECK(t->type == st::dtype::BF16);
      CHECK(std::memcmp(f.data(*t).data(), by[copied]->bf16.data(), f.data(*t).size()) == 0);
    }
    for (int l = 0; l < 2; ++l) {
      const auto p = "model.layers." + std::to_string(l) + ".";
      const std::vector<std::string> shards{p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"};
      std::vector<std::string> plain{p + "self_attn.o_proj.weight"};
      if (scheme == "fp8_per_tensor") {
        // The fused layer: one scale from the amax of all shards, shared.
        float amax = 0;
        for (const auto& s : shards) amax = std::max(amax, ref::amax_propagating(view(*by[s])));
        for (const auto& s : shards) {
          std::vector<std::uint8_t> q(by[s]->bf16.size());
          float sc = 0;
          ref::weight_per_tensor_with_amax(view(*by[s]), amax, q.data(), &sc);
          check_tensor(f, s, q, s.substr(0, s.size() - 7) + ".weight_scale", {sc});
        }
      } else {
        plain.insert(plain.end(), shards.begin(), shards.end());
      }
      for (const auto& s : plain) {
        const auto& t = *by[s];
        std::vector<std::uint8_t> q(t.bf16.size());
        std::vector<float> sc;
        const auto base = s.substr(0, s.size() - 7);
        if (scheme == "fp8_per_block") {
          sc.resize(static_cast<std::size_t>(((t.shape[0] + 127) / 128) * ((t.shape[1] + 127) / 128)));
          ref::block_128x128(view(t), {}, q.data(), sc.data());
          check_tensor(f, s, q, base + ".weight_scale_inv", sc);
        } else if (scheme == "fp8_per_channel") {
          sc.resize(static_cast<std::size_t>(t.shape[0]));
          ref::weight_per_channel(view(t), q.data(), sc.data());
          check_tensor(f, s, q, base + ".weight_scale", sc);
        } else {
          sc.resize(1);
          ref::weight_per_tensor(view(t), q.data(), sc.data());
          check_tensor(f, s, q, base + ".weight_scale", sc);
        }
      }
      for (int e = 0; e < 4; ++e) {
        const auto x = p + "mlp.experts." + std::to_string(e) + ".";
        const auto &gate = *by[x + "gate_proj.weight"], &up = *by[x + "up_proj.weight"], &down = *by[x + "down_proj.weight"];
        std::vector<std::uint8_t> q(gate.bf16.size()), qd(down.bf16.size());
        if (scheme == "fp8_per_tensor") {  // gate and up share the w13 scale
          const float amax = std::max(ref::amax_propagating(view(gate)), ref::amax_propagating(view(up)));
          for (const auto* m : {&gate, &up}) {
            float sc = 0;
            ref::weight_per_tensor_with_amax(view(*m), amax, q.data(), &sc);
            check_tensor(f, m->name, q, m->name.substr(0, m->name.size() - 7) + ".weight_scale", {sc});
          }
          float sd = 0;
          ref::weight_per_tensor(view(down), qd.data(), &sd);
          check_tensor(f, down.name, qd, x + "down_proj.weight_scale", {sd});
        } else if (scheme == "fp8_per_channel") {  // w13 rows: the per-token rule; w2: per-channel
          std::vector<float> sc(128), sd(256);
          for (const auto* m : {&gate, &up}) {
            ref::dynamic_per_token(view(*m), q.data(), sc.data());
            check_tensor(f, m->name, q, m->name.substr(0, m->name.size() - 7) + ".weight_scale", sc);
          }
          ref::weight_per_channel(view(down), qd.data(), sd.data());
          check_tensor(f, down.name, qd, x + "down_proj.weight_scale", sd);
        } else {
          std::vector<float> sc(2), sd(2);
          for (const auto* m : {&gate, &up}) {
            ref::block_128x128(view(*m), {}, q.data(), sc.data());
            check_tensor(f, m->name, q, m->name.substr(0, m->name.size() - 7) + ".weight_scale_inv", sc);
          }
          ref::block_128x128(view(down), {}, qd.data(), sd.data());
          check_tensor(f, down.name, qd, x + "down_proj.weight_scale_inv", sd);
        }
      }
    }
    // The default format: vLLM's fp8 method for blocks, compressed-tensors for the layouts
    // transformers' fp8 method cannot load.
    const auto config = slurp(cfg);
    if (scheme == "fp8_per_block") {
      CHECK_THAT(r.err, Catch::Contains("format: vllm-fp8"));
      CHECK_THAT(config, Catch::Contains(R"("quant_method":"fp8")"));
      CHECK_THAT(config, Catch::Contains(R"("activation_scheme":"dynamic")"));
      CHECK_THAT(config, Catch::Contains(R"("weight_block_size":[128,128])"));
      CHECK_THAT(config, Catch::Contains(R"("ignored_layers":["model.layers.0.mlp.gate","model.layers.1.mlp.gate","lm_head"])"));
    } else {
      CHECK_THAT(r.err, Catch::Contains("format: compressed-tensors"));
      CHECK_THAT(config, Catch::Contains(R"("quant_method":"compressed-tensors")"));
      CHECK_THAT(config, Catch::Contains(scheme == "fp8_per_tensor" ? R"("strategy":"tensor")" : R"("strategy":"channel")"));
      CHECK_THAT(config, Catch::Contains(R"("ignore":["model.layers.0.mlp.gate","model.layers.1.mlp.gate","lm_head"])"));
    }
  }
}

TEST_CASE("qpolicy quantize refuses bad inputs with exit 2 and leaves no output", "[checkpoint][quantize]") {
  const auto good = write_checkpoint(synthetic(), "good.safetensors");
  auto refused = [&](const std::vector<std::string>& args, const std::string& out, const std::string& message) {
    const auto r = quantize(args);
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::Contains(message));
    CHECK_FALSE(fs::exists(out));
    for (const auto& e : fs::directory_iterator(dir())) CHECK(e.path().string().find(out + ".tmp") == std::string::npos);
  };
  const auto out = (dir() / "refused.safetensors").string();
  // Truncated file.
  const auto truncated = (dir() / "truncated.safetensors").string();
  fs::copy_file(good, truncated, fs::copy_options::overwrite_existing);
  fs::resize_file(truncated, fs::file_size(good) - 1000);
  refused({"-q", "fp8_per_tensor", "-o", out, truncated}, out, "the file is truncated");
  // Hostile header length.
  const auto hostile = (dir() / "hostile.safetensors").string();
  {
    std::ofstream h(hostile, std::ios::binary);
    const char len[8] = {'\xff', '\xff', '\xff', '\xff', 0, 0, 0, 0};
    h.write(len, 8);
    h << "{}";
  }
  refused({"-q", "fp8_per_block", "-o", out, hostile}, out, "exceeds");
  // NaN-laden weight.
  const auto nan = write_checkpoint(synthetic(true), "nan.safetensors");
  refused({"-q", "fp8_per_tensor", "-o", out, nan}, out, "NaN or infinite values");
  // Wrong dtype for a planned weight.
  {
    const auto path = (dir() / "int.safetensors").string();
    st::file_writer w(path, {{"model.layers.0.mlp.down_proj.weight", st::dtype::I32, {2, 2}}}, {});
    const std::vector<std::int32_t> ints{1, 2, 3, 4};
    w.write(std::as_bytes(std::span(ints)));
    w.finish();
    refused({"-q", "fp8_per_block", "-o", out, path}, out, "quantize takes 2-D BF16, F16 or F32 weights");
  }
  // The synthetic checkpoint with one tensor reshaped.
  const auto reshaped = [](const std::string& name, std::int64_t rows, std::int64_t cols) {
    auto ts = synthetic();
    for (auto& t : ts)
      if (t.name == name) {
        t.shape = {rows, cols};
        t.bf16.resize(static_cast<std::size_t>(rows * cols));
      }
    return ts;
  };
  // A fused shard that per-block cannot take.
  {
    const auto path = write_checkpoint(reshaped("model.layers.0.self_attn.k_proj.weight", 100, 256), "odd.safetensors");
    refused({"-q", "fp8_per_block", "-o", out, path}, out,
            "fp8_per_block needs every shard of model.layers.0.self_attn.qkv_proj to have a multiple of 128 rows, got [256, 100, 128]");
  }
  // A width a low-precision formula's blocks do not tile (the online MXFP4 MoE path would pad it).
  {
    const auto path = write_checkpoint(reshaped("model.layers.1.mlp.experts.2.down_proj.weight", 256, 100), "odd-experts.safetensors");
    refused({"-q", "online", "-c", R"({"moe": "mxfp4"})", "-o", out, path}, out,
            "MXFP4 requires input_size_per_partition (100) to be divisible by 32. (tensor "
            "'model.layers.1.mlp.experts.2.down_proj.weight' of layer model.layers.1.mlp.experts); vLLM's online path pads "
            "experts to whole blocks, but a checkpoint stores the unpadded weights and must tile them");
  }
  // Nothing configured (a checkpoint method name resolves to None).
  refused({"-q", "fp8", "-o", out, good}, out, "nothing to quantize");
}

#include "qpolicy/io/json_front.hpp"
#include "qpolicy/plan/detail/build_plan.hpp"
#include "src/io/checkpoint_stages.hpp"

TEST_CASE("quantize's stages, each on its own: units from the scheme contract, then the output layout", "[quantize]") {
  namespace io = qpolicy::checkpoint_io;
  const auto in = write_checkpoint(synthetic(), "stages.safetensors");
  std::vector<std::string> warnings;
  std::vector<io::checkpoint_index> indexes;
  const auto ck = io::open_checkpoint(io::checkpoint_files({in}, indexes, warnings), indexes);
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> weights;
  for (const auto& t : ck.order) weights.emplace_back(t.info->name, t.info->shape);
  const auto model = qpolicy::derive_model(weights, nullptr);
  auto plan_for = [&](const char* q) {
    qpolicy::config_request r;
    r.quantization = std::string(q);
    return qpolicy::make_plan(qpolicy::resolve(r).config, model);
  };

  // Per tensor: a fused qkv_proj is one joint unit, and so is each expert's gate + up (spec §4, §9).
  const auto tensor_plan = plan_for("fp8_per_tensor");
  const auto units = io::plan_units(ck, model, tensor_plan, qpolicy::checkpoint_format::compressed_tensors);
  CHECK(units.members.size() == 2 * (4 + 4 * 3));  // q, k, v, o and 4 experts x 3, per layer (not the router)
  CHECK(units.joints.size() == 2 * (1 + 4));
  CHECK(units.joints[0] == std::vector<std::string>{"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                                                    "model.layers.0.self_attn.v_proj.weight"});
  CHECK(!units.members.count("model.layers.0.mlp.gate.weight"));
  // Per channel: no joint scale; an expert's w13 follows the per-token rule (the formula of the contract's MoE w13 key).
  const auto channel_units = io::plan_units(ck, model, plan_for("fp8_per_channel"), qpolicy::checkpoint_format::compressed_tensors);
  CHECK(channel_units.joints.empty());
  CHECK(channel_units.members.at("model.layers.1.mlp.experts.2.up_proj.weight").formula == qpolicy::schemes::formula::fp8_per_token);
  CHECK(channel_units.members.at("model.layers.1.mlp.experts.2.down_proj.weight").formula == qpolicy::schemes::formula::fp8_per_channel_static);

  // Per block: scales named weight_scale_inv in the block grid, right after their weight (vLLM's fp8
  // format; compressed-tensors names every scale weight_scale).
  const auto block_plan = plan_for("fp8_per_block");
  const auto layout = io::plan_output(ck, io::plan_units(ck, model, block_plan, qpolicy::checkpoint_format::vllm_fp8), model, block_plan);
  CHECK(io::plan_units(ck, model, block_plan, qpolicy::checkpoint_format::compressed_tensors)
            .members.at("model.layers.0.self_attn.k_proj.weight")
            .scale_suffix == "weight_scale");
  std::size_t at = 0;
  while (layout.specs[at].name != "model.layers.0.self_attn.k_proj.weight") ++at;
  CHECK(layout.specs[at].type == st::dtype::F8_E4M3);
  CHECK(layout.specs[at + 1].name == "model.layers.0.self_attn.k_proj.weight_scale_inv");
  CHECK(layout.specs[at + 1].shape == std::vector<std::int64_t>{1, 2});
  CHECK(layout.specs.size() == ck.order.size() + units.members.size());
  CHECK(layout.metadata.at("qpolicy.plan.model.layers.0.self_attn.qkv_proj") == "fp8_per_block (linear)");
  CHECK(layout.metadata.at("format") == "pt");
}

TEST_CASE("quantize streams tensors larger than a chunk to the same bits as one whole call", "[checkpoint][quantize][stream]") {
  // Tensors of 16-25 MB: two row chunks each (16 MiB of input a chunk; 128-row slabs for blocks), a
  // fused qkv_proj and an expert's gate/up sharing a per-tensor scale across chunks and tensors.
  std::mt19937 rng(7);
  std::vector<tensor> ts;
  auto add = [&](std::string name, std::int64_t rows, std::int64_t cols) {
    ts.push_back({std::move(name), {rows, cols}, qpolicy::test::random_bf16(static_cast<std::size_t>(rows * cols), 0.05f, rng)});
  };
  add("model.layers.0.input_layernorm.weight", 1, 3);  // 3 elements: every later tensor starts 2-byte aligned only
  ts.back().shape = {3};
  add("model.layers.0.self_attn.q_proj.weight", 6144, 2048);
  add("model.layers.0.self_attn.k_proj.weight", 1024, 2048);
  add("model.layers.0.self_attn.v_proj.weight", 1024, 2048);
  add("model.layers.0.self_attn.o_proj.weight", 2048, 6144);
  add("model.layers.0.mlp.gate.weight", 2, 2048);
  for (const char* p : {"gate_proj", "up_proj"}) add(std::string("model.layers.0.mlp.experts.0.") + p + ".weight", 4224, 2048);
  add("model.layers.0.mlp.experts.0.down_proj.weight", 2048, 4224);
  add("model.layers.0.mlp.experts.1.gate_proj.weight", 4224, 2048);
  add("model.layers.0.mlp.experts.1.up_proj.weight", 4224, 2048);
  add("model.layers.0.mlp.experts.1.down_proj.weight", 2048, 4224);
  const auto in = write_checkpoint(ts, "large.safetensors");
  std::map<std::string, const tensor*> by;
  for (const auto& t : ts) by[t.name] = &t;
  for (const std::string scheme : {"fp8_per_tensor", "fp8_per_channel", "fp8_per_block"}) {
    INFO(scheme);
    const auto out = (dir() / ("large-" + scheme + ".safetensors")).string();
    const auto r = quantize({"-q", scheme, "-o", out, "--threads", "2", in});
    INFO(r.err);
    REQUIRE(r.status == 0);
    st::file f(out);
    auto expect = [&](const std::string& name, const std::vector<std::string>& joint, bool w13) {
      const auto& t = *by[name];
      const auto base = name.substr(0, name.size() - 7);
      std::vector<std::uint8_t> q(t.bf16.size());
      std::vector<float> sc;
      if (scheme == "fp8_per_tensor") {
        float amax = 0;
        for (const auto& j : joint) amax = std::max(amax, ref::amax_propagating(view(*by[j])));
        sc.resize(1);
        ref::weight_per_tensor_with_amax(view(t), amax, q.data(), sc.data());
        check_tensor(f, name, q, base + ".weight_scale", sc);
      } else if (scheme == "fp8_per_channel") {
        sc.resize(static_cast<std::size_t>(t.shape[0]));
        if (w13) ref::dynamic_per_token(view(t), q.data(), sc.data());
        else ref::weight_per_channel(view(t), q.data(), sc.data());
        check_tensor(f, name, q, base + ".weight_scale", sc);
      } else {
        sc.resize(static_cast<std::size_t>(((t.shape[0] + 127) / 128) * ((t.shape[1] + 127) / 128)));
        ref::block_128x128(view(t), {}, q.data(), sc.data());
        check_tensor(f, name, q, base + ".weight_scale_inv", sc);
      }
    };
    const std::vector<std::string> qkv{"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                                       "model.layers.0.self_attn.v_proj.weight"};
    for (const auto& name : qkv) expect(name, qkv, false);
    expect("model.layers.0.self_attn.o_proj.weight", {"model.layers.0.self_attn.o_proj.weight"}, false);
    for (int e = 0; e < 2; ++e) {
      const auto x = "model.layers.0.mlp.experts." + std::to_string(e) + ".";
      const std::vector<std::string> w13{x + "gate_proj.weight", x + "up_proj.weight"};
      for (const auto& name : w13) expect(name, w13, true);
      expect(x + "down_proj.weight", {x + "down_proj.weight"}, false);
    }
    const auto* norm = f.find("model.layers.0.input_layernorm.weight");
    REQUIRE(norm);
    CHECK(std::memcmp(f.data(*norm).data(), by["model.layers.0.input_layernorm.weight"]->bf16.data(), 6) == 0);
  }
}
