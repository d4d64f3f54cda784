#pragma once
// Opt-in shape checks (spec §8, `--check-shapes --tp N`): whether each planned scheme can take the
// layer's sizes on every tensor-parallel rank. Errors go into the plan; the rest are warnings.
#include <string>
#include <string_view>

#include "qpolicy/model/model.hpp"
#include "qpolicy/plan/plan.hpp"
#include "qpolicy/schemes/contract.hpp"
#include "qpolicy/schemes/formulas.hpp"

namespace qpolicy {

namespace detail {
constexpr bool row_parallel(const layer_desc& l) { return std::string_view(l.class_name).find("RowParallel") != std::string_view::npos; }
constexpr bool replicated(const layer_desc& l) { return std::string_view(l.class_name).find("Replicated") != std::string_view::npos; }
constexpr std::string num(std::int64_t v) { return text::to_decimal(v); }
}  // namespace detail

/// Adds shape errors/warnings for the quantized layers of `p` (sizes missing from the model are skipped).
constexpr void check_shapes(plan& p, const model_desc& model, const plan_options& options) {
  const std::int64_t tp = options.tp;
  for (std::size_t i = 0; i < p.layers.size(); ++i) {
    auto& l = p.layers[i];
    const auto& layer = model.layers[i];
    if (!l.quantized()) continue;
    auto fail = [&](std::string message) {
      layer_plan e;
      e.error = static_cast<std::int32_t>(p.errors.size());
      p.errors.push_back(std::move(message));
      l = e;
    };
    auto warn = [&](std::string message) { p.warnings.push_back(layer.name + ": " + std::move(message)); };
    const std::string scheme(to_string(l.decided));
    // What the scheme's kernels need (its contract): block-scaled GEMMs need K in whole blocks; the
    // other scaled GEMMs prefer dimensions in multiples of 16. Schemes without kernels get no checks.
    const bool has_contract = schemes::has_contract(l.decided);
    const auto scales = has_contract ? schemes::contract_of(l.decided).scales : std::nullopt;
    const bool blocks = scales == schemes::weight_scales::block_128x128;
    const bool scaled = scales && !blocks;
    const std::int64_t bk = schemes::block_k, multiple = has_contract ? schemes::contract_of(l.decided).preferred_multiple : 1;
    // The low-precision schemes: K in whole blocks for linear layers, the MoE sizes their contract takes
    // (vLLM's messages), padding reported.
    const auto weight_formula = schemes::weight_formula_of(l.decided);
    if (layer.kind == layer_kind::linear && layer.shape.size() == 2) {
      const auto out = layer.shape[0], in = layer.shape[1];
      const bool split_in = tp > 1 && detail::row_parallel(layer);
      const bool split_out = tp > 1 && !detail::row_parallel(layer) && !detail::replicated(layer);
      if ((split_in && in % tp) || (split_out && out % tp)) {
        fail(layer.name + ": " + (split_in ? "in_features " + detail::num(in) : "out_features " + detail::num(out)) +
             " is not divisible by the tensor-parallel degree " + detail::num(tp));
        continue;
      }
      const auto in_rank = split_in ? in / tp : in;
      const auto out_rank = split_out ? out / tp : out;
      if (weight_formula) {
        const auto& f = schemes::formula_of(*weight_formula);
        if (in_rank % f.k_multiple) fail(layer.name + ": " + schemes::block_message(f, in_rank));
        continue;
      }
      if (blocks) {
        if (in_rank % bk) {
          fail(layer.name + ": " + scheme + " needs in_features" + (split_in ? " per rank (" + detail::num(in) + "/" + detail::num(tp) + " = " : " (") +
               detail::num(in_rank) + ") to be a multiple of " + detail::num(bk) + " (1x" + detail::num(bk) + " activation groups)");
          continue;
        }
        if (out_rank % bk) warn(scheme + ": out_features" + std::string(split_out ? " per rank " : " ") + detail::num(out_rank) + " is not a multiple of " + detail::num(bk) + "; the last weight block is padded");
        for (auto s : layer.shard_sizes)
          if ((split_out ? s / tp : s) % bk) {
            warn(scheme + ": fused shard of " + detail::num(s) + " rows is not a multiple of " + detail::num(bk) + "; weight blocks straddle shards");
            break;
          }
      } else if (scaled) {
        if (in_rank % multiple || out_rank % multiple)
          warn(scheme + ": shape [" + detail::num(out_rank) + ", " + detail::num(in_rank) + "] has a dimension that is not a multiple of " + detail::num(multiple));
      }
    } else if (layer.kind == layer_kind::moe && layer.hidden_size && layer.intermediate_size) {
      const auto h = *layer.hidden_size, inter = *layer.intermediate_size;
      if (tp > 1 && inter % tp) {
        fail(layer.name + ": intermediate_size " + detail::num(inter) + " is not divisible by the tensor-parallel degree " + detail::num(tp));
        continue;
      }
      const auto i_rank = inter / tp;
      if (weight_formula) {
        const auto& c = schemes::contract_of(l.decided);
        if (c.moe_multiple > 1 && (h % c.moe_multiple || i_rank % c.moe_multiple)) {
          if (c.moe_pads)
            warn(scheme + ": hidden_size " + detail::num(h) + " / intermediate_size per rank " + detail::num(i_rank) +
                 " not a multiple of " + detail::num(c.moe_multiple) + "; expert weights are zero-padded (vLLM's maybe_roundup_sizes)");
          else
            fail(layer.name + ": " + schemes::with_k(c.moe_message, h % c.moe_multiple ? h : i_rank));
        }
        continue;
      }
      if (blocks && (h % bk || i_rank % bk))
        warn(scheme + ": hidden_size " + detail::num(h) + " / intermediate_size per rank " + detail::num(i_rank) + " not a multiple of " + detail::num(bk) + "; expert weights are zero-padded");
      if (scaled && (h % multiple || i_rank % multiple))
        warn(scheme + ": hidden_size " + detail::num(h) + " / intermediate_size per rank " + detail::num(i_rank) + " not a multiple of " + detail::num(multiple));
    }
  }
}

}  // namespace qpolicy
