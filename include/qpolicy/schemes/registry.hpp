#pragma once
// The type-level registry: one Boost.Hana sequence of tag types per vocabulary (methods, quant keys,
// formulas), each with one tag per row of its table, and every type list the library and the tests walk
// derived from them by Hana algorithms: the kernels' instantiation lists, the tests' type lists, the
// runtime id -> tag dispatch (dispatch/dispatch.hpp). Counts come from the tables. Only the Hana headers
// it needs, so kernel translation units (nvcc) include it too.
#include <boost/hana/filter.hpp>
#include <boost/hana/flatten.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <boost/hana/unpack.hpp>
#include <array>
#include <cstddef>
#include <utility>

#include "qpolicy/schemes/contract.hpp"
#include "qpolicy/schemes/formulas.hpp"
#include "qpolicy/schemes/tags.hpp"

namespace qpolicy::registry {

namespace detail {
template <class Tag, class Id, std::size_t... I>
constexpr auto tags_of(std::index_sequence<I...>) {
  return boost::hana::tuple_t<typename Tag::template of<static_cast<Id>(I)>...>;
}
struct method_tags {
  template <method M>
  using of = method_tag<M>;
};
struct key_tags {
  template <key_id K>
  using of = key_tag<K>;
};
struct formula_tags {
  template <schemes::formula F>
  using of = formula_tag<F>;
};
}  // namespace detail

/// Every method a layer can get, one tag per value of `method`.
inline constexpr auto method_types = detail::tags_of<detail::method_tags, method>(std::make_index_sequence<method_count>{});

/// Every quant key, one tag per row of the key table.
inline constexpr auto key_types = detail::tags_of<detail::key_tags, key_id>(std::make_index_sequence<key_count>{});

/// Every formula, one tag per row of the formula table.
inline constexpr auto formula_types =
    detail::tags_of<detail::formula_tags, schemes::formula>(std::make_index_sequence<schemes::formula_count>{});

/// The tags of `types` whose `Tag::id` satisfies `Pred` (a capture-free lambda over ids).
template <class Types, class Pred>
constexpr auto where(Types types, Pred) {
  return boost::hana::filter(types, [](auto t) { return boost::hana::bool_c<Pred{}(decltype(t)::type::id)>; });
}

/// The schemes whose FP8 kernels exist (the contract's rows with a weight-scale layout).
inline constexpr auto fp8_scheme_types = where(method_types, [](method m) { return schemes::has_fp8_gemm(m); });

/// The schemes whose weights run the weight-only GEMM (a low-precision weight formula).
inline constexpr auto weight_only_scheme_types =
    where(method_types, [](method m) { return schemes::is_weight_only(m); });

/// The low-precision formulas (the quantizers outside FP8's float32-scaled e4m3).
inline constexpr auto block_quantizer_formula_types =
    where(formula_types, [](schemes::formula f) { return schemes::formula_of(f).low_precision(); });

/// The weight formulas the weight-only GEMM decodes (the low-precision weight formulas; a rotated
/// weight is stored, and decoded, as its base formula's).
inline constexpr auto weight_only_formula_types = where(formula_types, [](schemes::formula f) {
  const auto& row = schemes::formula_of(f);
  return row.low_precision() && row.weight && row.transform == schemes::pre_transform::none;
});

/// The dynamic activation keys with an FP8 quantizer (the contract's activation rows).
inline constexpr auto activation_key_types = where(key_types, [](key_id k) { return schemes::has_activation(k); });

/// A scheme tag and an activation key tag that pair (the FP8 forward layer types' two parameters).
template <class Scheme, class Act>
struct forward_pair {
  using scheme = Scheme;
  using activation = Act;
};

namespace detail {
template <class Scheme>
constexpr auto pairs_of(Scheme) {
  return boost::hana::unpack(
      where(activation_key_types,
            [](key_id k) {
              return schemes::check_pairing(*schemes::contract_of(Scheme::id).scales, schemes::activation_quant_of(k),
                                            schemes::block_k) == schemes::pairing::ok;
            }),
      [](auto... act) { return boost::hana::tuple_t<forward_pair<Scheme, typename decltype(act)::type>...>; });
}
}  // namespace detail

/// Every (FP8 scheme, activation key) pair a forward pass takes, as forward_pair types.
inline constexpr auto forward_pair_types = boost::hana::unpack(fp8_scheme_types, [](auto... scheme) {
  return boost::hana::flatten(boost::hana::make_tuple(detail::pairs_of(typename decltype(scheme)::type{})...));
});

namespace detail {
template <layer_kind Kind, class Scheme>
constexpr auto layer_pairs_of(Scheme) {
  if constexpr (schemes::has_fp8_gemm(Scheme::id)) {
    return pairs_of(Scheme{});
  } else if constexpr (Kind == layer_kind::linear && !schemes::contract_of(Scheme::id).linear) {
    return boost::hana::tuple_t<>;  // the scheme quantizes MoE experts only
  } else if constexpr (Kind == layer_kind::linear && schemes::online_method_of(Scheme::id).rotates_input) {
    // The row's treatment, and the Hadamard-rotated input of a method that rotates (new-schemes §A).
    return boost::hana::tuple_t<forward_pair<Scheme, treatment_tag<schemes::treatment_of(Scheme::id, Kind)>>,
                                forward_pair<Scheme, treatment_tag<schemes::activation_treatment::rotated>>>;
  } else {
    return boost::hana::tuple_t<forward_pair<Scheme, treatment_tag<schemes::treatment_of(Scheme::id, Kind)>>>;
  }
}
}  // namespace detail

/// Every (scheme, activation tag) a layer of kind Kind takes, for every scheme with kernels: the scaled
/// FP8 schemes with each activation key their weights pair with, the weight-only schemes with their
/// row's treatment for the kind (and a rotating linear method with its rotated input too).
template <layer_kind Kind>
inline constexpr auto layer_pair_types =
    boost::hana::unpack(where(method_types, [](method m) { return schemes::has_kernels(m); }), [](auto... scheme) {
      return boost::hana::flatten(boost::hana::make_tuple(detail::layer_pairs_of<Kind>(typename decltype(scheme)::type{})...));
    });

/// A Hana sequence of types as `List<T...>` (Catch2's TEMPLATE_LIST_TEST_CASE takes std::tuple<T...>).
template <template <class...> class List, class Types>
using as_list = decltype(boost::hana::unpack(Types{}, [](auto... t) { return List<typename decltype(t)::type...>{}; }));

/// Calls fn(T{}) for each tag type T of `types`, in order (instantiating what fn names for each).
template <class Types, class Fn>
constexpr void for_each_type(Types types, Fn&& fn) {
  boost::hana::for_each(types, [&](auto t) { fn(typename decltype(t)::type{}); });
}

/// A std::array of what `entry(T{})` gives for each tag type T of `types`: an instantiation list (an
/// external array of function pointers makes each kernel of the list emitted in its translation unit).
template <class Types, class Entry>
constexpr auto table_of(Types types, Entry entry) {
  return boost::hana::unpack(types, [&](auto... t) { return std::array{entry(typename decltype(t)::type{})...}; });
}

}  // namespace qpolicy::registry
