#pragma once
// Policy tag types: one small named struct per quant key, per shorthand / method, and the markers of
// a spec field (unset, null). Tags carry their ids as static constexpr data, so they are plain type
// template arguments for kernels too (nvcc 13 rejects class-type NTTPs on __global__ templates).
#include <string_view>

#include "qpolicy/keys/release.hpp"

namespace qpolicy {

/// A quant key as a type: `qp::fp8_per_block_static`.
template <key_id Id>
struct key_tag {
  static constexpr key_id id = Id;
  static constexpr std::string_view name = key_table[static_cast<std::size_t>(Id)].name;
};

using fp8_per_tensor_static = key_tag<key_id::fp8_per_tensor_static>;
using fp8_per_tensor_dynamic = key_tag<key_id::fp8_per_tensor_dynamic>;
using fp8_per_token = key_tag<key_id::fp8_per_token>;
using fp8_per_channel_static = key_tag<key_id::fp8_per_channel_static>;
using fp8_per_block_static = key_tag<key_id::fp8_per_block_static>;
using fp8_per_block_dynamic = key_tag<key_id::fp8_per_block_dynamic>;
using mxfp8_dynamic = key_tag<key_id::mxfp8_dynamic>;
using mxfp4_dynamic = key_tag<key_id::mxfp4_dynamic>;
using int8_per_channel_static = key_tag<key_id::int8_per_channel_static>;
using mxfp8_static = key_tag<key_id::mxfp8_static>;
using mxfp4_static = key_tag<key_id::mxfp4_static>;
using nvfp4 = key_tag<key_id::nvfp4>;
/// The dynamic per-token NVFP4 key, named `nvfp4_per_token` from vLLM 0.32 (the shorthand of that name is
/// the method tag `nvfp4_per_token`).
using nvfp4_per_token_dynamic = key_tag<key_id::nvfp4_per_token>;
using int8_per_group_32 = key_tag<key_id::int8_per_group_32>;
using int4_per_group_32 = key_tag<key_id::int4_per_group_32>;
using lut_b = key_tag<key_id::lut_b>;

/// A method of the plan as a type; the online shorthands are the methods of the same name.
template <method M>
struct method_tag {
  static constexpr method id = M;
  static constexpr std::string_view name = to_string(M);
};

/// Layers online quantization does not handle (plan method null).
using not_handled = method_tag<method::none>;
using unquantized = method_tag<method::unquantized>;
using fp8_per_tensor = method_tag<method::fp8_per_tensor>;
using fp8_per_block = method_tag<method::fp8_per_block>;
using fp8_per_channel = method_tag<method::fp8_per_channel>;
using mxfp8 = method_tag<method::mxfp8>;
using mxfp4 = method_tag<method::mxfp4>;
using int8_per_channel_weight_only = method_tag<method::int8_per_channel_weight_only>;
using nvfp4_per_token = method_tag<method::nvfp4_per_token>;
using lut_b_moe = method_tag<method::lut_b_moe>;

/// An online shorthand that is not a method of the plan (its layers plan as another method).
template <shorthand S>
struct shorthand_tag {
  static constexpr shorthand id = S;
  static constexpr std::string_view name = to_string(S);
};
/// MXFP4 linears with a 32-wide Hadamard rotation (vLLM 0.34); they plan as mxfp4.
using mxfp4_hadamard32 = shorthand_tag<shorthand::mxfp4_hadamard32>;

/// A vLLM release as a policy parameter: policy<Q, C, vllm_0_33>.
template <vllm_release R>
struct vllm_tag {
  static constexpr vllm_release id = R;
  static constexpr std::string_view name = to_string(R);
};
using vllm_0_30 = vllm_tag<vllm_release::v0_30>;
using vllm_0_31 = vllm_tag<vllm_release::v0_31>;
using vllm_0_32 = vllm_tag<vllm_release::v0_32>;
using vllm_0_33 = vllm_tag<vllm_release::v0_33>;
using vllm_0_34 = vllm_tag<vllm_release::v0_34>;
/// The newest release: what a policy follows unless it names one.
using newest_vllm = vllm_tag<newest_release>;

/// `quantization="online"`: the config alone decides.
struct online {
  static constexpr std::string_view name = "online";
};
/// A spec field given as None (`{"weight": null}`).
struct null {
  static constexpr std::string_view name = "None";
};
/// A spec field left out (pydantic's fields_set does not contain it).
struct unset {};

template <class T>
inline constexpr bool is_key_tag = false;
template <key_id K>
inline constexpr bool is_key_tag<key_tag<K>> = true;

}  // namespace qpolicy
