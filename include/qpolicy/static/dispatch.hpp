#pragma once
// The one place where a runtime method id becomes its scheme tag type: a Boost.Hana walk over the
// closed list of methods. Runtime plans reach kernels through here; compile-time plans through
// for_each_layer, which needs no dispatch. Hana is heavy: keep this header out of kernel TUs.
#include <boost/hana/for_each.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <stdexcept>
#include <string>

#include "qpolicy/plan/plan.hpp"
#include "qpolicy/static/tags.hpp"

namespace qpolicy {

/// Every method a layer can get, as tag types: the closed list of schemes.
inline constexpr auto scheme_types =
    boost::hana::tuple_t<not_handled, unquantized, fp8_per_tensor, fp8_per_block, fp8_per_channel, mxfp8, mxfp4,
                         int8_per_channel_weight_only, nvfp4_per_token>;

/// Every quant key, as tag types.
inline constexpr auto key_types =
    boost::hana::tuple_t<fp8_per_tensor_static, fp8_per_tensor_dynamic, fp8_per_token, fp8_per_channel_static,
                         fp8_per_block_static, fp8_per_block_dynamic, mxfp8_dynamic, mxfp4_dynamic,
                         int8_per_channel_static, mxfp8_static, mxfp4_static, nvfp4>;

/// The one place where a runtime id becomes a type: calls fn(T{}) for the T of `types` whose
/// T::id is `id`; throws std::invalid_argument when none is.
template <class Types, class Id, class Fn>
constexpr void with_tag(Types types, Id id, Fn&& fn) {
  bool found = false;
  boost::hana::for_each(types, [&](auto type) {
    using tag = typename decltype(type)::type;
    if (!found && tag::id == id) {
      found = true;
      fn(tag{});
    }
  });
  if (!found) throw std::invalid_argument("id " + std::to_string(static_cast<int>(id)) + " is not in the closed list");
}

/// Calls fn(Scheme{}) with the tag type of method `m`.
template <class Fn>
constexpr void with_scheme(method m, Fn&& fn) {
  with_tag(scheme_types, m, fn);
}

/// Calls fn(Key{}) with the tag type of quant key `k`.
template <class Fn>
constexpr void with_key(key_id k, Fn&& fn) {
  with_tag(key_types, k, fn);
}

/// Calls fn(layer_plan, Scheme{}) for every layer of a runtime plan, in model order. Layers that
/// failed have no scheme: plans with errors are refused.
template <class Fn>
void for_each_layer(const plan& p, Fn&& fn) {
  if (const auto* e = p.first_error()) throw std::invalid_argument("the plan has a layer error: " + *e);
  for (const auto& layer : p.layers) with_scheme(layer.decided, [&](auto scheme) { fn(layer, scheme); });
}

}  // namespace qpolicy
