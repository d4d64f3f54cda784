#pragma once
// Visiting a compile-time plan with each layer's scheme as a type: fn(layer_plan, Scheme{}) where
// Scheme is the layer's method tag, chosen by the compiler, with no runtime branch. Light (no Hana),
// so kernel translation units can use it.
#include <cstddef>
#include <utility>

#include "qpolicy/typed/static_plan.hpp"

namespace qpolicy {

namespace detail {
template <const auto& Plan, class Fn, std::size_t... I>
constexpr void for_each_layer_impl(Fn& fn, std::index_sequence<I...>) {
  (fn(Plan[I], method_tag<Plan[I].decided>{}), ...);
}
}  // namespace detail

/// Calls fn(layer_plan, Scheme{}) for every layer of `Plan` (a plan_for<...> reference), in model
/// order; Scheme is method_tag<the layer's method>.
template <const auto& Plan, class Fn>
constexpr void for_each_layer(Fn&& fn) {
  detail::for_each_layer_impl<Plan>(fn, std::make_index_sequence<std::remove_cvref_t<decltype(Plan)>::size()>{});
}

/// The layers of `Plan` that got method `M`, as a compile-time array of layer indices.
template <const auto& Plan, method M>
inline constexpr auto layers_with = [] {
  constexpr std::size_t n = Plan.count(M);
  std::array<std::size_t, n> out{};
  std::size_t k = 0;
  for (std::size_t i = 0; i < Plan.size(); ++i)
    if (Plan[i].decided == M) out[k++] = i;
  return out;
}();

}  // namespace qpolicy
