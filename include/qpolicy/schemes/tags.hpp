#pragma once
// Policy tag types: one small named struct per quant key, per shorthand / method, and the markers of
// a spec field (unset, null). Tags carry their ids as static constexpr data, so they are plain type
// template arguments for kernels too (nvcc 13 rejects class-type NTTPs on __global__ templates).
#include <string_view>

#include "qpolicy/keys/quant_key.hpp"

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
