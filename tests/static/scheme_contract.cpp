// Compile-only: the scheme contract and what derives from it. The name lists must read exactly as
// vLLM prints them (the literals below are vLLM's), and the contract must agree with the vocabulary.
#include "qpolicy/dispatch/dispatch.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/schemes/registry.hpp"

namespace qp = qpolicy;
namespace sc = qpolicy::schemes;

// Name lists derived from the tables, as vLLM's messages list them.
// Each release's QUANT_KEY_NAMES and shorthands (spec §9.1), as its messages list them.
using rel = qp::vllm_release;
static_assert(qp::quant_key_names_repr(rel::v0_30) ==
              "['fp8_per_block_dynamic', 'fp8_per_block_static', 'fp8_per_channel_static', 'fp8_per_tensor_dynamic', "
              "'fp8_per_tensor_static', 'fp8_per_token', 'int8_per_channel_static', 'mxfp4', 'mxfp8']");
static_assert(qp::quant_key_names_repr(rel::v0_31) == qp::quant_key_names_repr(rel::v0_30));
static_assert(qp::quant_key_names_repr(rel::v0_32) ==
              "['fp8_per_block_dynamic', 'fp8_per_block_static', 'fp8_per_channel_static', 'fp8_per_tensor_dynamic', "
              "'fp8_per_tensor_static', 'fp8_per_token', 'int4_per_group_32', 'int8_per_channel_static', 'mxfp4', 'mxfp8', "
              "'nvfp4_per_token']");
static_assert(qp::quant_key_names_repr(rel::v0_34) ==
              "['fp8_per_block_dynamic', 'fp8_per_block_static', 'fp8_per_channel_static', 'fp8_per_tensor_dynamic', "
              "'fp8_per_tensor_static', 'fp8_per_token', 'int4_per_group_32', 'int8_per_channel_static', 'int8_per_group_32', "
              "'lut_b', 'mxfp4', 'mxfp8', 'nvfp4_per_token']");
static_assert(qp::shorthand_names_repr(rel::v0_33) ==
              "['fp8_per_block', 'fp8_per_channel', 'fp8_per_tensor', 'int8_per_channel_weight_only', 'mxfp4', 'mxfp8', "
              "'nvfp4_per_token']");
static_assert(qp::shorthand_names_repr(rel::v0_34) ==
              "['fp8_per_block', 'fp8_per_channel', 'fp8_per_tensor', 'int8_per_channel_weight_only', 'lut_b_moe', 'mxfp4', "
              "'mxfp4_hadamard32', 'mxfp8', 'nvfp4_per_token']");
static_assert(qp::release_names_repr() == "['0.30', '0.31', '0.32', '0.33', '0.34']");
// MXFP8 is the dynamic key in 0.30-0.33 (shorthand and dispatch), the static one from 0.34.
static_assert(qp::key_name(qp::key_id::mxfp4_static, rel::v0_33) == "QuantKey(u8,scale(u8,static,GroupShape(row=1, col=32)),symmetric)");
static_assert(qp::key_name(qp::key_id::mxfp4_static, rel::v0_34) == "mxfp4");
static_assert(sc::dispatch_method(qp::key_id::mxfp8_dynamic, qp::layer_kind::linear, rel::v0_33) == qp::method::mxfp8);
static_assert(!sc::dispatch_method(qp::key_id::mxfp8_dynamic, qp::layer_kind::linear, rel::v0_34));
static_assert(!sc::dispatch_method(qp::key_id::lut_b, qp::layer_kind::moe, rel::v0_33));
static_assert(sc::dispatch_method(qp::key_id::lut_b, qp::layer_kind::moe, rel::v0_34) == qp::method::lut_b_moe);
static_assert(qp::legacy_online_names_repr() == "['fp8_per_block', 'fp8_per_tensor', 'online']");
static_assert(sc::formula_names(false) ==
              "fp8_per_tensor_static, fp8_per_tensor_dynamic, fp8_per_token, fp8_per_channel_static, fp8_per_block_static, "
              "fp8_per_block_dynamic");
static_assert(sc::formula_names(true) ==
              "mxfp8, mxfp8_dynamic, mxfp4, mxfp4_dynamic, int8_per_channel_static, nvfp4, nvfp4_per_token, mxfp4_hadamard32, "
              "mxfp4_hadamard32_dynamic, mxfp4_hadamard32_rceil, lut_b");
static_assert(sc::formula_names(true, true) == "mxfp8, mxfp8_dynamic, mxfp4, mxfp4_dynamic, nvfp4, nvfp4_per_token, mxfp4_hadamard32, "
                                               "mxfp4_hadamard32_dynamic, mxfp4_hadamard32_rceil");
static_assert(sc::kernel_methods_text() ==
              "fp8_per_tensor, fp8_per_channel, fp8_per_block, mxfp8, mxfp4, int8_per_channel_weight_only, nvfp4_per_token and "
              "lut_b_moe");

// The dispatch table of spec §3.6, now derived from the contract.
static_assert(sc::dispatch_method(qp::key_id::fp8_per_block_static, qp::layer_kind::linear) == qp::method::fp8_per_block);
static_assert(sc::dispatch_method(qp::key_id::mxfp4_static, qp::layer_kind::moe) == qp::method::mxfp4);
static_assert(!sc::dispatch_method(qp::key_id::int8_per_channel_static, qp::layer_kind::linear));
static_assert(sc::dispatch_method(qp::key_id::int8_per_channel_static, qp::layer_kind::moe) == qp::method::int8_per_channel_weight_only);
static_assert(!sc::dispatch_method(qp::key_id::nvfp4, qp::layer_kind::linear));
static_assert(!sc::dispatch_method(qp::key_id::fp8_per_token, qp::layer_kind::linear));  // activation keys select nothing
static_assert(!sc::dispatch_method(qp::key_id::fp8_per_tensor_static, qp::layer_kind::other));

// Every shorthand's slots dispatch, in every release that has it, to a scheme of the contract.
consteval bool shorthands_have_contracts() {
  for (const auto& r : qp::release_table)
    for (const auto& s : qp::shorthand_table) {
      if (!qp::holds(r.shorthands, s.id)) continue;
      for (auto kind : {qp::layer_kind::linear, qp::layer_kind::moe}) {
        const auto k = qp::shorthand_weight(s.id, kind, r.id);
        if (k && !(sc::dispatch_method(*k, kind, r.id) && sc::has_contract(*sc::dispatch_method(*k, kind, r.id))))
          return false;
      }
    }
  return true;
}
static_assert(shorthands_have_contracts());
static_assert(!sc::has_contract(qp::method::none) && !sc::has_contract(qp::method::unquantized));
static_assert(sc::has_activation(qp::key_id::fp8_per_token) && !sc::has_activation(qp::key_id::fp8_per_tensor_static));

// Scale shapes from the keys' group shapes.
static_assert(sc::scale_grid(qp::key_id::fp8_per_block_static, 300, 200) == std::array<std::int64_t, 2>{3, 2});
static_assert(sc::scale_grid(qp::key_id::fp8_per_block_dynamic, 5, 256) == std::array<std::int64_t, 2>{5, 2});
static_assert(sc::scale_grid(qp::key_id::fp8_per_channel_static, 7, 9) == std::array<std::int64_t, 2>{7, 1});
static_assert(sc::scale_grid(qp::key_id::fp8_per_token, 7, 9) == std::array<std::int64_t, 2>{7, 1});
static_assert(sc::scale_grid(qp::key_id::fp8_per_tensor_static, 7, 9) == std::array<std::int64_t, 2>{1, 1});
static_assert(sc::scale_grid(qp::key_id::mxfp8_dynamic, 4, 64) == std::array<std::int64_t, 2>{4, 2});

// The pairing rule, once.
static_assert(sc::check_pairing(sc::weight_scales::block_128x128, sc::activation_quant::group_128, 256) == sc::pairing::ok);
static_assert(sc::check_pairing(sc::weight_scales::block_128x128, sc::activation_quant::group_128, 200) ==
              sc::pairing::k_not_block_multiple);
static_assert(sc::check_pairing(sc::weight_scales::block_128x128, sc::activation_quant::per_token, 256) ==
              sc::pairing::blocks_need_groups);
static_assert(sc::check_pairing(sc::weight_scales::per_channel, sc::activation_quant::group_128, 256) ==
              sc::pairing::groups_need_blocks);
static_assert(sc::check_pairing(sc::weight_scales::per_tensor, sc::activation_quant::per_token, 3) == sc::pairing::ok);
static_assert(sc::check_pairing(sc::weight_scales::per_tensor, sc::activation_quant::per_token, 0) == sc::pairing::k_not_positive);

// The formula table: quantize-tensor's names (the low-precision ones first), each key's formula.
static_assert(sc::find_formula("mxfp8") == sc::formula::mxfp8_torch);
static_assert(sc::find_formula("fp8_per_token") == sc::formula::fp8_per_token);
static_assert(!sc::find_formula("mxfp8_static"));
static_assert(sc::formula_of_key(qp::key_id::mxfp8_dynamic) == sc::formula::mxfp8_flashinfer);
static_assert(sc::formula_of_key(qp::key_id::nvfp4) == sc::formula::nvfp4_weight);
static_assert(sc::formula_of(sc::formula::fp8_per_block_dynamic).k_multiple == 128 &&
              sc::formula_of(sc::formula::fp8_per_block_static).k_multiple == 1);
static_assert(sc::formula_of(sc::formula::nvfp4_weight).takes_amax && sc::formula_of(sc::formula::fp8_per_tensor_static).takes_amax &&
              !sc::formula_of(sc::formula::fp8_per_token).takes_amax);
static_assert(sc::formula_of(sc::formula::int8_per_channel).block() == 0 && sc::formula_of(sc::formula::mxfp4_even).block() == 32);
static_assert(sc::weight_formula_of(qp::method::mxfp4) == sc::formula::mxfp4_even && !sc::weight_formula_of(qp::method::fp8_per_block));

// FP8 kernel selection: a weight formula runs its scheme's weight kernel, an activation formula its
// key's activation kernel.
template <class Scheme>
struct weight_family {
  using scheme = Scheme;
};
template <class Key>
struct activation_family {
  using key = Key;
};
static_assert(std::is_same_v<sc::fp8_kernel_of<weight_family, activation_family, qp::formulas::fp8_per_block_static>,
                             weight_family<qp::fp8_per_block>>);
static_assert(std::is_same_v<sc::fp8_kernel_of<weight_family, activation_family, qp::formulas::fp8_per_token>,
                             activation_family<qp::fp8_per_token>>);

// The registry: one tag per row of each table, and the lists derived from the tables.
namespace reg = qpolicy::registry;
static_assert(boost::hana::length(reg::method_types) == qp::method_count);
static_assert(boost::hana::length(reg::key_types) == qp::key_count);
static_assert(boost::hana::length(reg::formula_types) == sc::formula_count && sc::formula_count == 17);
static_assert(boost::hana::length(reg::fp8_scheme_types) == 3);
static_assert(boost::hana::length(reg::block_quantizer_formula_types) == 11);
static_assert(std::is_same_v<reg::as_list<std::tuple, decltype(reg::weight_only_formula_types)>,
                             std::tuple<qp::formulas::mxfp8_torch, qp::formulas::mxfp4_even, qp::formulas::int8_per_channel,
                                        qp::formulas::nvfp4_weight, qp::formulas::lut_b>>);
// A rotating row is its base formula after a transform, and quant keys name the unrotated formulas.
static_assert(sc::formula_of(sc::formula::mxfp4_hadamard_weight).base == sc::formula::mxfp4_even &&
              sc::formula_of(sc::formula::mxfp4_hadamard_rceil).base == sc::formula::mxfp4_rceil &&
              sc::formula_of_key(qp::key_id::mxfp4_static) == sc::formula::mxfp4_even &&
              sc::formula_of_key(qp::key_id::lut_b) == sc::formula::lut_b);
static_assert(sc::code_bytes(sc::formula_of(sc::formula::lut_b), 16, 128) == 4 * 192 &&
              sc::block_scale_shape(sc::formula_of(sc::formula::lut_b), 16, 128, false) == std::array<std::int64_t, 2>{2, 2});
static_assert(sc::block_message(sc::formula_of(sc::formula::lut_b), 100, 12) == "LUT-B requires dims divisible by (8, 64), got (12, 100)");
static_assert(std::is_same_v<reg::as_list<std::tuple, decltype(reg::fp8_scheme_types)>,
                             std::tuple<qp::fp8_per_tensor, qp::fp8_per_block, qp::fp8_per_channel>>);
static_assert(std::is_same_v<reg::as_list<std::tuple, decltype(reg::weight_only_scheme_types)>,
                             std::tuple<qp::mxfp8, qp::mxfp4, qp::int8_per_channel_weight_only, qp::nvfp4_per_token, qp::lut_b_moe>>);
// FP8 pairs, mxfp8, mxfp4 and mxfp4 with a rotated input
static_assert(boost::hana::length(reg::layer_pair_types<qp::layer_kind::linear>) == 5 + 3);
static_assert(boost::hana::length(reg::layer_pair_types<qp::layer_kind::moe>) == 5 + 5);
static_assert(sc::takes_treatment(qp::method::mxfp4, qp::layer_kind::linear, sc::activation_treatment::rotated_mxfp4_qdq) &&
              !sc::takes_treatment(qp::method::mxfp4, qp::layer_kind::moe, sc::activation_treatment::rotated) &&
              !sc::takes_treatment(qp::method::mxfp8, qp::layer_kind::linear, sc::activation_treatment::rotated));
static_assert(std::is_same_v<
              reg::as_list<std::tuple, decltype(reg::layer_pair_types<qp::layer_kind::moe>)>,
              std::tuple<reg::forward_pair<qp::fp8_per_tensor, qp::fp8_per_tensor_dynamic>, reg::forward_pair<qp::fp8_per_tensor, qp::fp8_per_token>,
                         reg::forward_pair<qp::fp8_per_block, qp::fp8_per_block_dynamic>,
                         reg::forward_pair<qp::fp8_per_channel, qp::fp8_per_tensor_dynamic>, reg::forward_pair<qp::fp8_per_channel, qp::fp8_per_token>,
                         reg::forward_pair<qp::mxfp8, qp::treatment_tag<sc::activation_treatment::none>>,
                         reg::forward_pair<qp::mxfp4, qp::treatment_tag<sc::activation_treatment::mxfp4_qdq>>,
                         reg::forward_pair<qp::int8_per_channel_weight_only, qp::treatment_tag<sc::activation_treatment::none>>,
                         reg::forward_pair<qp::nvfp4_per_token, qp::treatment_tag<sc::activation_treatment::nvfp4_per_token>>,
                         reg::forward_pair<qp::lut_b_moe, qp::treatment_tag<sc::activation_treatment::mxfp8_qdq>>>>);
using pairs = reg::as_list<std::tuple, decltype(reg::forward_pair_types)>;
static_assert(std::tuple_size_v<pairs> == 5);  // per-tensor and per-channel x 2, block x 1
static_assert(std::is_same_v<std::tuple_element_t<2, pairs>, reg::forward_pair<qp::fp8_per_block, qp::fp8_per_block_dynamic>>);

int main() { return 0; }
