#pragma once
// Which kernel of a backend runs a quant key's formula, derived from the scheme contract: a static
// (weight) key runs the weight kernel of the scheme whose weight key it is, a dynamic key its
// activation kernel. Backends name their kernel families (cpu::weight_kernel, cuda::activation_kernel...),
// this header picks the member; no list of keys is written anywhere else.
#include <cstddef>
#include <type_traits>
#include <utility>

#include "qpolicy/schemes/contract.hpp"
#include "qpolicy/schemes/tags.hpp"

namespace qpolicy::schemes {

/// The method whose weights key `k` quantizes in this build, or `none`.
constexpr method weight_method_of(key_id k) {
  for (const auto& c : scheme_table)
    if (c.weight_key == k && c.scales) return c.id;
  return method::none;
}

/// The kernel of quant key tag Key among a backend's weight and activation kernel families. Naming a
/// family member does not instantiate it: only keys with a tensor kernel (has_tensor_kernel) may run it.
template <template <class> class WeightKernel, template <class> class ActivationKernel, class Key>
using kernel_of_key = std::conditional_t<key_of(Key::id).scale.is_static,
                                         WeightKernel<method_tag<weight_method_of(Key::id)>>, ActivationKernel<Key>>;

/// Calls fn(key_tag<k>{}) for every key k of the key table, in table order (a compile-time walk, for
/// explicit instantiation and tests; runtime ids become tags in dispatch/dispatch.hpp only).
template <class Fn, std::size_t... I>
constexpr void for_each_key_tag(Fn&& fn, std::index_sequence<I...>) {
  (fn(key_tag<static_cast<key_id>(I)>{}), ...);
}
template <class Fn>
constexpr void for_each_key_tag(Fn&& fn) {
  for_each_key_tag(fn, std::make_index_sequence<key_count>{});
}

}  // namespace qpolicy::schemes
