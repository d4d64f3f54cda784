#pragma once
// The one place where a runtime id becomes its tag type: a Boost.Hana walk over the registry's closed
// lists (schemes/registry.hpp). Runtime plans reach kernels through here; compile-time plans through
// for_each_layer, which needs no dispatch.
#include <stdexcept>
#include <string>
#include <utility>

#include "qpolicy/plan/plan.hpp"
#include "qpolicy/schemes/registry.hpp"

namespace qpolicy {

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
  with_tag(registry::method_types, m, fn);
}

/// Calls fn(Formula{}) with the tag type of formula `f`.
template <class Fn>
constexpr void with_formula(schemes::formula f, Fn&& fn) {
  with_tag(registry::formula_types, f, fn);
}

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
    for (const auto& a : schemes::activation_table) keys += (keys.empty() ? "" : ", ") + key_name(a.key, newest_release);
    throw std::invalid_argument("activation key " + key_name(key, newest_release) + " has no FP8 activation quantizer (" + keys + " have one)");
  }
  with_tag(registry::activation_key_types, key, fn);
}

/// Calls fn(Act{}) with the activation tag a planned layer of kind Kind runs with under Scheme: for a
/// scheme whose row runs the weight-only GEMM, the row's treatment for the kind (treatment_tag);
/// otherwise the layer's activation key tag (with_activation). These are what the layer types take as
/// their activation (cpu::pairs_with says which FP8 pairings they refuse).
template <class Scheme, layer_kind Kind, class Fn>
void with_layer_activation(const layer_plan& l, Fn&& fn) {
  if constexpr (schemes::is_weight_only(Scheme::id)) {
    // A rotated input (the plan's hadamard_size) runs the rotation before the row's treatment (Marlin).
    if constexpr (Kind == layer_kind::linear && schemes::online_method_of(Scheme::id).rotates_input) {
      if (l.hadamard) {
        fn(treatment_tag<schemes::activation_treatment::rotated>{});
        return;
      }
    }
    fn(treatment_tag<schemes::treatment_of(Scheme::id, Kind)>{});
  } else {
    with_activation(l, Kind, fn);
  }
}

/// Calls fn(layer_plan, Scheme{}) for every layer of a runtime plan, in model order. Layers that
/// failed have no scheme: plans with errors are refused.
template <class Fn>
void for_each_layer(const plan& p, Fn&& fn) {
  if (const auto* e = p.first_error()) throw std::invalid_argument("the plan has a layer error: " + *e);
  for (const auto& layer : p.layers) with_scheme(layer.decided, [&](auto scheme) { fn(layer, scheme); });
}

}  // namespace qpolicy
