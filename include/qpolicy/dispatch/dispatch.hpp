#pragma once
// The one place where a runtime method id becomes its scheme tag type: a Boost.Hana walk over the
// closed list of methods. Runtime plans reach kernels through here; compile-time plans through
// for_each_layer, which needs no dispatch. Hana is heavy: keep this header out of kernel TUs.
#include <boost/hana/filter.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <stdexcept>
#include <string>
#include <utility>

#include "qpolicy/plan/plan.hpp"
#include "qpolicy/schemes/contract.hpp"
#include "qpolicy/schemes/formulas.hpp"
#include "qpolicy/schemes/tags.hpp"

namespace qpolicy {

namespace detail {
template <std::size_t... I>
constexpr auto method_tags(std::index_sequence<I...>) {
  return boost::hana::tuple_t<method_tag<static_cast<method>(I)>...>;
}
template <std::size_t... I>
constexpr auto key_tags(std::index_sequence<I...>) {
  return boost::hana::tuple_t<key_tag<static_cast<key_id>(I)>...>;
}
template <std::size_t... I>
constexpr auto formula_tags(std::index_sequence<I...>) {
  return boost::hana::tuple_t<formula_tag<static_cast<schemes::lp_formula>(I)>...>;
}
}  // namespace detail

/// Every method a layer can get, as tag types: the closed list of schemes, one per value of `method`.
inline constexpr auto scheme_types = detail::method_tags(std::make_index_sequence<method_count>{});

/// Every quant key, as tag types, one per value of `key_id`.
inline constexpr auto key_types = detail::key_tags(std::make_index_sequence<key_count>{});

/// Every low-precision formula, as tag types, one per value of `lp_formula`.
inline constexpr auto formula_types = detail::formula_tags(std::make_index_sequence<schemes::lp_formula_count>{});

/// The schemes with kernels in this build (the contract's rows with a scale layout).
inline constexpr auto kernel_scheme_types =
    boost::hana::filter(scheme_types, [](auto t) { return boost::hana::bool_c<schemes::has_kernels(decltype(t)::type::id)>; });

/// The keys with a tensor kernel (quantize-tensor's keys).
inline constexpr auto kernel_key_types =
    boost::hana::filter(key_types, [](auto t) { return boost::hana::bool_c<schemes::has_tensor_kernel(decltype(t)::type::id)>; });

// The lists cover every id: each enum's last value is its count minus one, and the list has one tag
// per value, so a new method or key joins the lists (and the dispatch) without an edit here.
static_assert(boost::hana::length(scheme_types) == method_count && to_string(static_cast<method>(method_count - 1)) == "nvfp4_per_token",
              "scheme_types must have one tag per method");
static_assert(boost::hana::length(formula_types) == schemes::lp_formula_count &&
                  schemes::formula_table[schemes::lp_formula_count - 1].id == static_cast<schemes::lp_formula>(schemes::lp_formula_count - 1),
              "formula_types must have one tag per low-precision formula");
static_assert(boost::hana::length(key_types) == key_count && key_table[key_count - 1].id == static_cast<key_id>(key_count - 1),
              "key_types must have one tag per quant key");

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

/// Calls fn(Formula{}) with the tag type of low-precision formula `f`.
template <class Fn>
constexpr void with_formula(schemes::lp_formula f, Fn&& fn) {
  with_tag(formula_types, f, fn);
}

/// The activation keys with a quantizer (the contract's activation rows), as tag types.
inline constexpr auto activation_key_types =
    boost::hana::filter(key_types, [](auto t) { return boost::hana::bool_c<schemes::has_activation(decltype(t)::type::id)>; });

/// The activation key a planned layer of kind `kind` runs with: its explicit key, or its scheme's
/// default. Throws std::invalid_argument for a layer without activation quantization (activation:
/// null) or a scheme without a default.
inline key_id activation_key_of(const layer_plan& l, layer_kind kind) {
  if (l.activation == activation_kind::key) return l.activation_key;
  if (l.activation == activation_kind::none)
    throw std::invalid_argument("the plan gives this layer no activation quantization (activation: null); the FP8 GEMMs "
                                "need FP8 activations");
  const auto key = schemes::default_activation(l.decided, kind);
  if (!key) throw std::invalid_argument(std::string(to_string(l.decided)) + " has no default activation quantizer");
  return *key;
}

/// Calls fn(Act{}) with the activation key tag of a planned layer (activation_key_of); throws
/// std::invalid_argument naming a key without an activation quantizer.
template <class Fn>
void with_activation(const layer_plan& l, layer_kind kind, Fn&& fn) {
  const key_id key = activation_key_of(l, kind);
  if (!schemes::has_activation(key)) {
    std::string keys;
    for (const auto& a : schemes::activation_table) keys += (keys.empty() ? "" : ", ") + key_name(a.key);
    throw std::invalid_argument("activation key " + key_name(key) + " has no FP8 activation quantizer (" + keys + " have one)");
  }
  with_tag(activation_key_types, key, fn);
}

/// Calls fn(layer_plan, Scheme{}) for every layer of a runtime plan, in model order. Layers that
/// failed have no scheme: plans with errors are refused.
template <class Fn>
void for_each_layer(const plan& p, Fn&& fn) {
  if (const auto* e = p.first_error()) throw std::invalid_argument("the plan has a layer error: " + *e);
  for (const auto& layer : p.layers) with_scheme(layer.decided, [&](auto scheme) { fn(layer, scheme); });
}

}  // namespace qpolicy
