// The FP8 vectors of shared/conformance/numerics_cases.json driven from outside: the inputs written to
// safetensors files, `qpolicy quantize-tensor` (every key and scale layout) and `qpolicy quantize` (an
// experts checkpoint) run on them, and the stored codes and scales compared with the vectors bit for bit.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "../support/fp8_cases.hpp"
#include "../support/quantize_tensor_cli.hpp"

namespace fp8 = qpolicy::fp8;
namespace st = qpolicy::safetensors;
using namespace qpolicy::test::fp8_cases;

namespace {

/// A case and the name its input tensor gets in the file.
struct cli_case {
  const bj::object* c;
  std::string tensor;
};

/// Runs quantize-tensor over the chosen cases' inputs (with the given extra flags) and returns the output.
std::unique_ptr<st::file> run_cli(const std::vector<cli_case>& chosen, const std::string& key, const std::vector<std::string>& flags) {
  std::vector<std::vector<std::uint16_t>> data;
  std::vector<qpolicy::test::cli_input> inputs;
  for (const auto& k : chosen) data.push_back(bf16(k.c->at("input")));
  for (std::size_t i = 0; i < chosen.size(); ++i)
    inputs.push_back({chosen[i].tensor, st::dtype::BF16, shape(chosen[i].c->at("input").at("shape")), std::as_bytes(std::span(data[i]))});
  return qpolicy::test::run_quantize_tensor(inputs, key, flags);
}

std::vector<std::uint8_t> codes_of(const st::file& f, const std::string& name) { return qpolicy::test::stored_bytes(f, name); }
std::vector<float> scales_of(const st::file& f, const std::string& name) {
  const auto d = qpolicy::test::stored_bytes(f, name + ".scale");
  std::vector<float> out(d.size() / 4);
  std::memcpy(out.data(), d.data(), d.size());
  return out;
}

}  // namespace

TEST_CASE("the vectors through qpolicy quantize-tensor on safetensors files", "[cli]") {
  struct route {
    std::string kind, key, output_scale;
    std::vector<std::string> flags;
    std::function<bool(const bj::object&)> take;
  };
  const auto all = [](const bj::object&) { return true; };
  const auto ue8m0 = [](bool want) {
    return [want](const bj::object& c) { return c.at("params").at("use_ue8m0").as_bool() == want; };
  };
  const std::vector<route> routes{
      {"weight_per_tensor", "fp8_per_tensor_static", "weight_scale_f32_hex", {}, all},
      {"dynamic_per_tensor", "fp8_per_tensor_dynamic", "scale_f32_hex", {}, all},
      {"dynamic_per_token", "fp8_per_token", "scale_f32_hex", {}, all},
      {"weight_per_channel", "fp8_per_channel_static", "weight_scale_f32_hex", {}, all},
      {"block_128x128", "fp8_per_block_static", "weight_scale_inv_f32_hex", {}, ue8m0(false)},
      {"block_128x128", "fp8_per_block_static", "weight_scale_inv_f32_hex", {"--ue8m0"}, ue8m0(true)},
      {"per_token_group", "fp8_per_block_dynamic", "scale_row_major_f32_hex", {"--scale-layout", "row"}, ue8m0(false)},
      {"per_token_group", "fp8_per_block_dynamic", "scale_row_major_f32_hex", {"--ue8m0"}, ue8m0(true)},
  };
  for (const auto& r : routes) {
    std::vector<cli_case> chosen;
    for (const auto* c : of_kind(r.kind))
      if (r.take(*c)) chosen.push_back({c, "case" + std::to_string(chosen.size())});
    if (chosen.empty()) continue;
    INFO(r.kind << " via --key " << r.key);
    const auto out = run_cli(chosen, r.key, r.flags);
    for (const auto& k : chosen) {
      INFO(k.c->at("id").as_string());
      check_codes(codes_of(*out, k.tensor), codes(k.c->at("output").at("q_hex")));
      const auto got = scales_of(*out, k.tensor);
      const auto want = words(k.c->at("output").at(r.output_scale));
      REQUIRE(got.size() == want.size());
      check_scales(got.data(), want);
    }
  }
  // The TMA-aligned column-major layout, stored as the padded buffer [K/128, align(M, 4)].
  std::vector<cli_case> tma;
  for (const auto* c : of_kind("per_token_group"))
    if (c->at("output").as_object().contains("scale_col_major_tma_aligned_f32_hex") && !c->at("params").at("use_ue8m0").as_bool())
      tma.push_back({c, "case" + std::to_string(tma.size())});
  const auto out = run_cli(tma, "fp8_per_block_dynamic", {"--scale-layout", "col-tma"});
  for (const auto& k : tma) {
    const auto& storage = k.c->at("output").at("scale_col_major_tma_aligned_f32_hex").at("storage");
    const auto want = words(storage);
    const auto got = scales_of(*out, k.tensor);
    REQUIRE(got.size() == want.size());
    const auto s = shape(k.c->at("input").at("shape"));
    const std::int64_t m4 = (s[0] + 3) / 4 * 4;
    for (std::size_t i = 0; i < want.size(); ++i)
      if (static_cast<std::int64_t>(i) % m4 < s[0]) CHECK(fp8::bits_of(got[i]) == want[i]);
    CHECK(out->find(k.tensor + ".scale")->shape == std::vector<std::int64_t>{s[1] / 128, m4});
  }
}

TEST_CASE("the MoE vectors through qpolicy quantize on an experts checkpoint", "[cli][moe]") {
  const char* exe = std::getenv("QPOLICY_EXE");
  REQUIRE(exe);
  const qpolicy::test::temp_dir scratch("moe");
  const auto& dir = scratch.path();
  // Splits the case's w13 [E, 2I, H] into gate/up and w2 [E, H, I] into down, under vLLM's names.
  auto checkpoint = [&](const bj::value& w13, const bj::value& w2, const std::string& path) {
    const auto s13 = shape(w13.at("shape")), s2 = shape(w2.at("shape"));
    const auto x13 = bf16(w13), x2 = bf16(w2);
    const std::int64_t experts = s13[0], inter = s13[1] / 2, hidden = s13[2];
    std::vector<st::tensor_spec> specs;
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto p = "model.layers.0.mlp.experts." + std::to_string(e) + ".";
      specs.push_back({p + "gate_proj.weight", st::dtype::BF16, {inter, hidden}});
      specs.push_back({p + "up_proj.weight", st::dtype::BF16, {inter, hidden}});
      specs.push_back({p + "down_proj.weight", st::dtype::BF16, {s2[1], s2[2]}});
    }
    st::file_writer w(path, specs, {});
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto* g = x13.data() + e * 2 * inter * hidden;
      w.write(std::as_bytes(std::span(g, static_cast<std::size_t>(2 * inter * hidden))));  // gate, then up
      w.write(std::as_bytes(std::span(x2.data() + e * s2[1] * s2[2], static_cast<std::size_t>(s2[1] * s2[2]))));
    }
    w.finish();
    return std::tuple{experts, inter, hidden, s2[1]};
  };
  auto quantize = [&](const std::string& scheme, const std::string& in, const std::string& out) {
    const auto r = qpolicy::test::run_process({exe, "quantize", "-q", scheme, "-o", out, in});
    INFO(r.err);
    REQUIRE(r.status == 0);
    return std::make_unique<st::file>(out);
  };
  // Rows [r0, r0 + rows) and columns [0, cols) of a row-major [*, width] code matrix.
  auto crop = [](const std::vector<std::uint8_t>& all, std::int64_t offset, std::int64_t width, std::int64_t r0,
                 std::int64_t rows, std::int64_t cols) {
    std::vector<std::uint8_t> out;
    for (std::int64_t r = r0; r < r0 + rows; ++r)
      out.insert(out.end(), all.begin() + offset + r * width, all.begin() + offset + r * width + cols);
    return out;
  };
  for (const auto* c : of_kind("moe_per_tensor")) {
    INFO(c->at("id").as_string());
    const auto in = (dir / "pt_in.safetensors").string();
    const auto [experts, inter, hidden, down_rows] = checkpoint(c->at("input").at("w13"), c->at("input").at("w2"), in);
    const auto f = quantize("fp8_per_tensor", in, (dir / "pt_out.safetensors").string());
    const auto q13 = codes(c->at("output").at("w13_q_hex")), q2 = codes(c->at("output").at("w2_q_hex"));
    const auto s13 = words(c->at("output").at("w13_weight_scale_f32_hex")), s2 = words(c->at("output").at("w2_weight_scale_f32_hex"));
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto p = "model.layers.0.mlp.experts." + std::to_string(e) + ".";
      const std::int64_t base = e * 2 * inter * hidden;
      check_codes(codes_of(*f, p + "gate_proj.weight"), crop(q13, base, hidden, 0, inter, hidden));
      check_codes(codes_of(*f, p + "up_proj.weight"), crop(q13, base, hidden, inter, inter, hidden));
      check_codes(codes_of(*f, p + "down_proj.weight"), crop(q2, e * down_rows * inter, inter, 0, down_rows, inter));
      for (const auto* proj : {"gate_proj", "up_proj"}) {  // one w13 scale shared by gate and up
        const auto d = f->data(*f->find(p + proj + ".weight_scale"));
        float s = 0;
        std::memcpy(&s, d.data(), 4);
        check_scales(&s, {s13[static_cast<std::size_t>(e)]});
      }
      const auto d = f->data(*f->find(p + "down_proj.weight_scale"));
      float s = 0;
      std::memcpy(&s, d.data(), 4);
      check_scales(&s, {s2[static_cast<std::size_t>(e)]});
    }
  }
  for (const auto* c : of_kind("moe_per_block")) {
    INFO(c->at("id").as_string());
    const auto in = (dir / "pb_in.safetensors").string();
    const auto [experts, inter, hidden, down_rows] =
        checkpoint(c->at("input").at("w13_unpadded"), c->at("input").at("w2_unpadded"), in);
    const auto f = quantize("fp8_per_block", in, (dir / "pb_out.safetensors").string());
    const auto q13 = codes(c->at("output").at("w13_q_hex_padded")), q2 = codes(c->at("output").at("w2_q_hex_padded"));
    const auto s13 = words(c->at("output").at("w13_weight_scale_inv_f32_hex"));
    const auto s2 = words(c->at("output").at("w2_weight_scale_inv_f32_hex"));
    const std::int64_t ip = (inter + 127) / 128 * 128, hp = (hidden + 127) / 128 * 128;
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto p = "model.layers.0.mlp.experts." + std::to_string(e) + ".";
      // Each matrix blocked on its own equals the padded w13/w2 blocks, cropped (spec §12).
      check_codes(codes_of(*f, p + "gate_proj.weight"), crop(q13, e * 2 * ip * hp, hp, 0, inter, hidden));
      check_codes(codes_of(*f, p + "up_proj.weight"), crop(q13, e * 2 * ip * hp, hp, ip, inter, hidden));
      check_codes(codes_of(*f, p + "down_proj.weight"), crop(q2, e * hp * ip, ip, 0, hidden, inter));
      const std::int64_t cb13 = hp / 128, rb13 = 2 * ip / 128;
      const auto gate_s = f->data(*f->find(p + "gate_proj.weight_scale_inv")), up_s = f->data(*f->find(p + "up_proj.weight_scale_inv"));
      const auto down_s = f->data(*f->find(p + "down_proj.weight_scale_inv"));
      const std::int64_t gate_blocks = (inter + 127) / 128, col_blocks = (hidden + 127) / 128;
      for (std::int64_t bi = 0; bi < gate_blocks; ++bi)
        for (std::int64_t bj = 0; bj < col_blocks; ++bj) {
          float g = 0, u = 0;
          std::memcpy(&g, gate_s.data() + 4 * (bi * col_blocks + bj), 4);
          std::memcpy(&u, up_s.data() + 4 * (bi * col_blocks + bj), 4);
          check_scales(&g, {s13[static_cast<std::size_t>(e * rb13 * cb13 + bi * cb13 + bj)]});
          check_scales(&u, {s13[static_cast<std::size_t>(e * rb13 * cb13 + (ip / 128 + bi) * cb13 + bj)]});
        }
      const std::int64_t rb2 = hp / 128, cb2 = ip / 128, down_rb = (hidden + 127) / 128, down_cb = (inter + 127) / 128;
      for (std::int64_t bi = 0; bi < down_rb; ++bi)
        for (std::int64_t bj = 0; bj < down_cb; ++bj) {
          float d = 0;
          std::memcpy(&d, down_s.data() + 4 * (bi * down_cb + bj), 4);
          check_scales(&d, {s2[static_cast<std::size_t>(e * rb2 * cb2 + bi * cb2 + bj)]});
        }
    }
  }
}

