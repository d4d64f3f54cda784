#pragma once
// Which kernel of a backend runs a quant key's formula, derived from the scheme contract: a static
// (weight) key runs the weight kernel of the scheme whose weight key it is, a dynamic key its
// activation kernel. Backends name their kernel families (cpu::weight_kernel, cuda::activation_kernel...),
// this header picks the member; no list of keys is written anywhere else.
#include <cstddef>
#include <tuple>
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

/// A scheme tag and an activation key tag that pair (the forward layer types' two parameters).
template <class Scheme, class Act>
struct forward_pair {
  using scheme = Scheme;
  using activation = Act;
};

namespace detail {
template <std::size_t... I>
auto kernel_schemes(std::index_sequence<I...>)
    -> decltype(std::tuple_cat(std::conditional_t<has_kernels(static_cast<method>(I)), std::tuple<method_tag<static_cast<method>(I)>>,
                                                  std::tuple<>>{}...));
template <std::size_t... I>
auto kernel_keys(std::index_sequence<I...>)
    -> decltype(std::tuple_cat(std::conditional_t<has_tensor_kernel(static_cast<key_id>(I)), std::tuple<key_tag<static_cast<key_id>(I)>>,
                                                  std::tuple<>>{}...));
template <class Scheme, std::size_t... I>
auto pairs_of(std::index_sequence<I...>)
    -> decltype(std::tuple_cat(std::conditional_t<check_pairing(*contract_of(Scheme::id).scales, activation_table[I].quant, block_k) ==
                                                      pairing::ok,
                                                  std::tuple<forward_pair<Scheme, key_tag<activation_table[I].key>>>, std::tuple<>>{}...));
template <class... Schemes>
auto all_pairs(std::tuple<Schemes...>*)
    -> decltype(std::tuple_cat(decltype(pairs_of<Schemes>(std::make_index_sequence<activation_table.size()>{})){}...));
}  // namespace detail

/// The scheme tags with kernels, in method order: std::tuple<fp8_per_tensor, fp8_per_block, ...>. The
/// type list tests and kernel instantiations walk (a scheme joins it by getting kernels).
using kernel_scheme_list = decltype(detail::kernel_schemes(std::make_index_sequence<method_count>{}));

/// The quant key tags with a tensor kernel, in key-table order (the kernels' property tests walk it).
using kernel_key_list = decltype(detail::kernel_keys(std::make_index_sequence<key_count>{}));

/// Every (scheme, activation key) pair a forward pass takes, as forward_pair types.
using forward_pair_list = decltype(detail::all_pairs(static_cast<kernel_scheme_list*>(nullptr)));

}  // namespace qpolicy::schemes
