#pragma once
// Test fixture of the checkpoint tests: a synthetic bf16 checkpoint with Qwen3-30B-A3B's tensor names
// and structure at small sizes, and a writer for it.
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "random_operands.hpp"
#include "qpolicy/io/safetensors.hpp"

namespace qpolicy::test {

/// One bf16 tensor of a synthetic checkpoint.
struct tensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<std::uint16_t> bf16;
};

/// Qwen3-30B-A3B's tensor names with H=256, q 256 / k,v 128 rows, 4 experts of I=128, 2 layers.
inline std::vector<tensor> synthetic(bool poison = false) {
  std::mt19937 rng(42);
  std::vector<tensor> out;
  auto add = [&](std::string name, std::vector<std::int64_t> shape) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    out.push_back({std::move(name), std::move(shape), qpolicy::test::random_bf16(static_cast<std::size_t>(n), 0.05f, rng)});
  };
  add("model.embed_tokens.weight", {1000, 256});
  for (int l = 0; l < 2; ++l) {
    const auto p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {256});
    add(p + "self_attn.q_proj.weight", {256, 256});
    add(p + "self_attn.k_proj.weight", {128, 256});
    add(p + "self_attn.v_proj.weight", {128, 256});
    add(p + "self_attn.o_proj.weight", {256, 256});
    add(p + "mlp.gate.weight", {4, 256});
    for (int e = 0; e < 4; ++e) {
      const auto x = p + "mlp.experts." + std::to_string(e) + ".";
      add(x + "gate_proj.weight", {128, 256});
      add(x + "up_proj.weight", {128, 256});
      add(x + "down_proj.weight", {256, 128});
    }
  }
  add("model.norm.weight", {256});
  add("lm_head.weight", {1000, 256});
  if (poison) out[2].bf16[7] = 0x7FC0;  // a NaN in q_proj
  return out;
}

/// Writes `ts` as one bf16 safetensors file at `path`.
inline void write_bf16_checkpoint(const std::vector<tensor>& ts, const std::string& path) {
  namespace st = qpolicy::safetensors;
  std::vector<st::tensor_spec> specs;
  for (const auto& t : ts) specs.push_back({t.name, st::dtype::BF16, t.shape});
  st::file_writer w(path, specs, {{"format", "pt"}});
  for (const auto& t : ts) w.write(std::as_bytes(std::span(t.bf16)));
  w.finish();
}

}  // namespace qpolicy::test
