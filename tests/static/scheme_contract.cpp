// Compile-only: the scheme contract and what derives from it. The name lists must read exactly as
// vLLM prints them (the literals below are vLLM's), and the contract must agree with the vocabulary.
#include "qpolicy/dispatch/dispatch.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/schemes/detail/kernel_select.hpp"

namespace qp = qpolicy;
namespace sc = qpolicy::schemes;

// Name lists derived from the tables, as vLLM's messages list them.
static_assert(qp::quant_key_names_repr() ==
              "['fp8_per_block_dynamic', 'fp8_per_block_static', 'fp8_per_channel_static', 'fp8_per_tensor_dynamic', "
              "'fp8_per_tensor_static', 'fp8_per_token', 'int8_per_channel_static', 'mxfp4', 'mxfp8']");
static_assert(qp::shorthand_names_repr() ==
              "['fp8_per_block', 'fp8_per_channel', 'fp8_per_tensor', 'int8_per_channel_weight_only', 'mxfp4', 'mxfp8', "
              "'nvfp4_per_token']");
static_assert(qp::legacy_online_names_repr() == "['fp8_per_block', 'fp8_per_tensor', 'online']");
static_assert(sc::tensor_kernel_keys() ==
              "fp8_per_tensor_static, fp8_per_tensor_dynamic, fp8_per_token, fp8_per_channel_static, fp8_per_block_static, "
              "fp8_per_block_dynamic");
static_assert(sc::kernel_methods_text() == "fp8_per_tensor, fp8_per_channel and fp8_per_block");

// The dispatch table of spec §3.6, now derived from the contract.
static_assert(sc::dispatch_method(qp::key_id::fp8_per_block_static, qp::layer_kind::linear) == qp::method::fp8_per_block);
static_assert(sc::dispatch_method(qp::key_id::mxfp4_static, qp::layer_kind::moe) == qp::method::mxfp4);
static_assert(!sc::dispatch_method(qp::key_id::int8_per_channel_static, qp::layer_kind::linear));
static_assert(sc::dispatch_method(qp::key_id::int8_per_channel_static, qp::layer_kind::moe) == qp::method::int8_per_channel_weight_only);
static_assert(!sc::dispatch_method(qp::key_id::nvfp4, qp::layer_kind::linear));
static_assert(!sc::dispatch_method(qp::key_id::fp8_per_token, qp::layer_kind::linear));  // activation keys select nothing
static_assert(!sc::dispatch_method(qp::key_id::fp8_per_tensor_static, qp::layer_kind::other));

// Every shorthand is a scheme of the contract, with the shorthand's weight key.
consteval bool shorthands_have_contracts() {
  for (const auto& s : qp::shorthand_table) {
    bool found = false;
    for (std::size_t m = 0; m < qp::method_count; ++m) {
      const auto method = static_cast<qp::method>(m);
      if (qp::to_string(method) != s.name) continue;
      found = sc::has_contract(method) && sc::contract_of(method).weight_key == *s.moe_weight;
    }
    if (!found) return false;
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

// Kernel selection: a static key runs its scheme's weight kernel, a dynamic key its activation kernel.
template <class Scheme>
struct weight_family {
  using scheme = Scheme;
};
template <class Key>
struct activation_family {
  using key = Key;
};
static_assert(std::is_same_v<sc::kernel_of_key<weight_family, activation_family, qp::fp8_per_block_static>,
                             weight_family<qp::fp8_per_block>>);
static_assert(std::is_same_v<sc::kernel_of_key<weight_family, activation_family, qp::fp8_per_token>,
                             activation_family<qp::fp8_per_token>>);

// The closed lists of the dispatch: one tag per id, and the kernel lists follow the contract.
static_assert(boost::hana::length(qp::scheme_types) == qp::method_count);
static_assert(boost::hana::length(qp::key_types) == qp::key_count);
static_assert(boost::hana::length(qp::kernel_scheme_types) == 3);
static_assert(boost::hana::length(qp::kernel_key_types) == 6);

// The type lists over the contract.
static_assert(std::is_same_v<sc::kernel_scheme_list, std::tuple<qp::fp8_per_tensor, qp::fp8_per_block, qp::fp8_per_channel>>);
static_assert(std::tuple_size_v<sc::forward_pair_list> == 5);  // per-tensor and per-channel x 2, block x 1
static_assert(std::is_same_v<std::tuple_element_t<2, sc::forward_pair_list>,
                             sc::forward_pair<qp::fp8_per_block, qp::fp8_per_block_dynamic>>);

int main() { return 0; }
