#pragma once
// Configs as types, for both schemas, lowered to the plain config values of config.hpp through the
// same rules and messages as the JSON front end:
//   current: quant_config<linear_spec<W, A, H>, moe_spec<W, A, H>, ignore<"p"...>, targets<target<"p", S>...>>
//   legacy:  online_quant_config<global_scheme<S>, linear_scheme_override<S>, moe_scheme_override<S>, ignore<...>>
// and policy<Quantization, Config, Release> for vLLM's `quantization` argument next to
// `quantization_config`, under the rules of one vLLM release (vllm_0_34, the newest, by default).
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "qpolicy/config/config.hpp"
#include "qpolicy/config/detail/field_rules.hpp"
#include "qpolicy/match/pattern.hpp"
#include "qpolicy/typed/fixed_string.hpp"
#include "qpolicy/schemes/tags.hpp"
#include "qpolicy/keys/release.hpp"

namespace qpolicy {

/// QuantSpec.hadamard_size (vLLM 0.34): a Hadamard rotation of N along the input dimension.
template <std::int64_t N>
struct hadamard {
  static constexpr std::int64_t size = N;
};
/// No hadamard_size written (None).
struct no_hadamard {
  static constexpr std::int64_t size = 0;
};

/// The default activation of a spec type: a weight tag alone is the string form (`"linear": NAME`);
/// `linear_spec<W, unset>` is the object form (`"linear": {"weight": NAME}`).
struct alone {};

/// A QuantSpec's fields as types: weight and activation each a key tag, `null` (None) or `unset` (left
/// out), and a rotation (`hadamard<N>`); `Field` is the config field it fills (`other`: none, a
/// targets value).
template <class Weight, class Activation, class Hadamard, layer_kind Field>
struct spec_fields {
  using weight = Weight;
  using activation = Activation;
  using rotation = Hadamard;
  static constexpr std::optional<layer_kind> field =
      Field == layer_kind::other ? std::nullopt : std::optional<layer_kind>(Field);
};
/// QuantSpec for linear layers: a shorthand alone (the string form), or the fields of spec_fields.
template <class Weight = unset, class Activation = alone, class Hadamard = no_hadamard>
struct linear_spec : spec_fields<Weight, Activation, Hadamard, layer_kind::linear> {};
/// QuantSpec for MoE layers (see linear_spec).
template <class Weight = unset, class Activation = alone, class Hadamard = no_hadamard>
struct moe_spec : spec_fields<Weight, Activation, Hadamard, layer_kind::moe> {};
/// A QuantSpec as a `targets` value (vLLM 0.34): it applies to linear and MoE layers alike.
template <class Weight = unset, class Activation = alone, class Hadamard = no_hadamard>
struct spec : spec_fields<Weight, Activation, Hadamard, layer_kind::other> {};
/// `ignore`: patterns (exact names, "re:" regexes, and in the current schema fnmatch globs).
template <fixed_string... Patterns>
struct ignore {
  // Members, not deduction from ignore<P...>: nvcc cannot deduce packs of class-type arguments.
  static constexpr bool is_ignore_list = true;
  static constexpr std::size_t count = sizeof...(Patterns);
  static constexpr std::string_view patterns[count + 1] = {Patterns.view()..., {}};
  static constexpr std::size_t chars = (std::size_t{0} + ... + Patterns.size());
};
/// One `targets` entry: pattern -> an online shorthand (a method or shorthand tag) or a spec<...>.
template <fixed_string Pattern, class Shorthand>
struct target {
  static constexpr auto pattern = Pattern;
  using value = Shorthand;
};
/// `targets`: entries in order; a repeated pattern keeps its first position and its last value.
template <class... Targets>
struct targets {
  static constexpr std::size_t count = sizeof...(Targets);
  static constexpr std::size_t chars = (std::size_t{0} + ... + Targets::pattern.size());
};
/// QuantizationConfigArgs (current schema).
template <class... Parts>
struct quant_config {};

/// Legacy OnlineQuantizationConfigArgs fields (schemes are the fp8_per_tensor / fp8_per_block tags).
template <class Scheme>
struct global_scheme {
  using scheme = Scheme;
};
template <class Scheme>
struct linear_scheme_override {
  using scheme = Scheme;
};
template <class Scheme>
struct moe_scheme_override {
  using scheme = Scheme;
};
/// OnlineQuantizationConfigArgs (legacy schema).
template <class... Parts>
struct online_quant_config {};

/// vLLM's `quantization` (a shorthand tag, `online`, or a checkpoint method `checkpoint<"fp8">`) with
/// its `quantization_config` (or none), under the rules of vLLM release `Release`. A config type alone
/// means policy<online, Config>; a shorthand tag alone, policy<Shorthand>.
template <class Quantization, class Config = void, class Release = newest_vllm>
struct policy {};

/// `quantization` naming a checkpoint's own method (`fp8`, `compressed-tensors`, ...): the config
/// composes with it (spec §9.3).
template <fixed_string Name>
struct checkpoint {
  static constexpr std::string_view name = Name.view();
};

namespace detail {

template <class T, template <class...> class Of>
inline constexpr bool is_instance = false;
template <template <class...> class Of, class... A>
inline constexpr bool is_instance<Of<A...>, Of> = true;

template <class T>
inline constexpr bool is_ignore = requires { T::is_ignore_list; };

/// The name a tag stands for in JSON ("None" for null).
template <class Tag>
constexpr std::string tag_name() {
  if constexpr (is_key_tag<Tag> && Tag::name.empty()) return key_repr(Tag::id);  // nameless keys print their form
  else return std::string(Tag::name);
}

template <class Tag>
constexpr std::optional<key_id> spec_field(field_errors& e, const std::string& loc, key_field field, vllm_release r) {
  if constexpr (std::is_same_v<Tag, null>) {
    return std::nullopt;
  } else {
    const auto name = tag_name<Tag>();
    return spec_field_key(e, loc, name, field, r);
  }
}

/// The string form: a name alone -- a shorthand, or a key whose name is no shorthand's (a key tag
/// named like a shorthand, e.g. the dynamic `nvfp4_per_token` key, can only be the object form).
template <class Spec>
constexpr bool is_string_form() {
  using W = typename Spec::weight;
  if constexpr (std::is_same_v<W, unset> || std::is_same_v<W, null> || !std::is_same_v<typename Spec::activation, alone> ||
                !std::is_same_v<typename Spec::rotation, no_hadamard>) {
    return false;
  } else {
    return !is_key_tag<W> || !find_by_name(shorthand_table, W::name).has_value();
  }
}

/// QuantSpec(**{...}) of a spec type's written fields, located at `loc` (spec §3.1, §9.4).
template <class Spec>
constexpr quant_spec lower_spec_object(field_errors& e, const std::string& loc, vllm_release r) {
  using W = typename Spec::weight;
  using A = typename Spec::activation;
  quant_spec s;
  if constexpr (!std::is_same_v<W, unset>) {
    s.weight_set = true;
    s.weight = spec_field<W>(e, loc + ".weight", key_field::weight, r);
  }
  if constexpr (!std::is_same_v<A, unset> && !std::is_same_v<A, alone>) {
    s.activation_set = true;
    s.activation = spec_field<A>(e, loc + ".activation", key_field::activation, r);
  }
  if constexpr (!std::is_same_v<typename Spec::rotation, no_hadamard>) {
    if (rules(r).hadamard_size) s.hadamard_size = hadamard_field(e, loc + ".hadamard_size", Spec::rotation::size);
    else e.add(loc + ".hadamard_size", "Unexpected keyword argument");
  }
  return s;
}

template <class Spec>
constexpr std::optional<quant_spec> lower_spec(field_errors& e, vllm_release r) {
  const std::string field(to_string(*Spec::field));
  if constexpr (is_string_form<Spec>()) {
    const auto name = tag_name<typename Spec::weight>();
    return spec_from_name(e, *Spec::field, name, r);
  } else {
    return lower_spec_object<Spec>(e, field, r);
  }
}

template <class T>
inline constexpr bool is_spec_value = requires { typename T::rotation; };

/// str() of a targets value as vLLM 0.30-0.33 print it in their refusal: a shorthand's name, or a
/// spec's dict ({'weight': 'mxfp4', 'activation': None}).
template <class V>
constexpr std::string target_value_str() {
  if constexpr (!is_spec_value<V>) {
    return tag_name<V>();
  } else {
    std::string out = "{";
    auto field = [&]<class T>(std::string_view key, T) {
      if constexpr (!std::is_same_v<T, unset> && !std::is_same_v<T, alone>) {
        if (out.size() > 1) out += ", ";
        out += text::py_repr(key) + ": ";
        if constexpr (std::is_same_v<T, null>) out += "None";
        else out += text::py_repr(tag_name<T>());
      }
    };
    field("weight", typename V::weight{});
    field("activation", typename V::activation{});
    if constexpr (!std::is_same_v<typename V::rotation, no_hadamard>) {
      if (out.size() > 1) out += ", ";
      out += "'hadamard_size': " + text::to_decimal(static_cast<long long>(V::rotation::size));
    }
    return out + "}";
  }
}

template <class Ignore>
constexpr std::vector<std::string> lower_ignore(Ignore) {
  std::vector<std::string> out;
  for (std::size_t k = 0; k < Ignore::count; ++k) out.emplace_back(Ignore::patterns[k]);
  return out;
}

template <class... T>
constexpr maybe<std::vector<target_rule>> lower_targets(field_errors& e, targets<T...>, vllm_release r) {
  std::vector<target_rule> out;
  bool stop = false;
  auto one = [&]<class Target>(Target) {
    if (stop) return;
    using V = typename Target::value;
    const std::string pattern(Target::pattern.view());
    target_rule rule{pattern, std::nullopt, {}};
    if constexpr (is_spec_value<V>) {
      if (rules(r).spec_targets) {
        const auto before = e.errors.size();
        rule.spec = lower_spec_object<V>(e, "targets", r);
        stop = e.errors.size() != before;
      } else {
        const auto str = target_value_str<V>();
        stop = !target_shorthand(e, pattern, false, {}, str, r);
      }
    } else {
      const auto name = tag_name<V>();
      rule.value = target_shorthand(e, pattern, true, name, name, r);
      stop = !rule.value;
    }
    if (stop || (stop = !target_pattern(e, pattern))) return;
    for (auto& existing : out)
      if (existing.pattern == pattern) {  // a dict: the last value at the first position
        existing = rule;
        return;
      }
    out.push_back(rule);
  };
  (one(T{}), ...);
  (void)one;  // an empty targets<> calls it for nothing
  return out;
}

/// The parts of a config type of kind `Pred`, checked to appear at most once.
template <template <class> class Pred, class... Parts>
inline constexpr std::size_t count_parts = (std::size_t{0} + ... + (Pred<Parts>::value ? 1 : 0));

template <class T> struct is_linear_spec : std::false_type {};
template <class W, class A, class H> struct is_linear_spec<linear_spec<W, A, H>> : std::true_type {};
template <class T> struct is_moe_spec : std::false_type {};
template <class W, class A, class H> struct is_moe_spec<moe_spec<W, A, H>> : std::true_type {};
template <class T> struct is_ignore_part : std::bool_constant<is_ignore<T>> {};
template <class T> struct is_targets_part : std::bool_constant<is_instance<T, targets>> {};
template <class T> struct is_global_part : std::bool_constant<is_instance<T, global_scheme>> {};
template <class T> struct is_linear_override_part : std::bool_constant<is_instance<T, linear_scheme_override>> {};
template <class T> struct is_moe_override_part : std::bool_constant<is_instance<T, moe_scheme_override>> {};

template <template <class> class Pred, class... Parts, class Fn>
constexpr void with_part(Fn&& fn) {
  [[maybe_unused]] auto visit = [&]<class P>(P) {
    if constexpr (Pred<P>::value) fn(P{});
  };
  (visit(Parts{}), ...);
}

template <class... Parts>
constexpr current_config lower_config(field_errors& e, quant_config<Parts...>, vllm_release r) {
  static_assert(((is_linear_spec<Parts>::value || is_moe_spec<Parts>::value || is_ignore_part<Parts>::value ||
                  is_targets_part<Parts>::value) && ...),
                "quant_config takes linear_spec, moe_spec, ignore and targets parts only");
  static_assert(count_parts<is_linear_spec, Parts...> <= 1, "quant_config has more than one linear_spec");
  static_assert(count_parts<is_moe_spec, Parts...> <= 1, "quant_config has more than one moe_spec");
  static_assert(count_parts<is_ignore_part, Parts...> <= 1, "quant_config has more than one ignore list");
  static_assert(count_parts<is_targets_part, Parts...> <= 1, "quant_config has more than one targets list");
  current_config c;
  c.release = r;
  // pydantic validates fields in declaration order, whatever order the parts are written in.
  with_part<is_linear_spec, Parts...>([&]<class P>(P) { c.linear = lower_spec<P>(e, r); });
  with_part<is_moe_spec, Parts...>([&]<class P>(P) { c.moe = lower_spec<P>(e, r); });
  with_part<is_ignore_part, Parts...>([&]<class P>(P) { c.ignore = lower_ignore(P{}); });
  with_part<is_targets_part, Parts...>([&]<class P>(P) { c.targets = lower_targets(e, P{}, r); });
  return c;
}

template <class Scheme>
constexpr std::optional<legacy_scheme> lower_scheme(field_errors& e, const char* field) {
  const auto name = tag_name<Scheme>();
  return legacy_scheme_field(e, field, name);
}

template <class... Parts>
constexpr legacy_global_field legacy_global(online_quant_config<Parts...>) {
  legacy_global_field g;
  with_part<is_global_part, Parts...>([&]<class P>(P) {
    const auto name = tag_name<typename P::scheme>();
    g = classify_legacy_global(name);
  });
  return g;
}

template <class... Parts>
constexpr legacy_config lower_config(field_errors& e, online_quant_config<Parts...>) {
  static_assert(((is_global_part<Parts>::value || is_linear_override_part<Parts>::value ||
                  is_moe_override_part<Parts>::value || is_ignore_part<Parts>::value) && ...),
                "online_quant_config takes global_scheme, linear_scheme_override, moe_scheme_override and ignore "
                "parts only");
  static_assert(count_parts<is_global_part, Parts...> <= 1 && count_parts<is_linear_override_part, Parts...> <= 1 &&
                    count_parts<is_moe_override_part, Parts...> <= 1 && count_parts<is_ignore_part, Parts...> <= 1,
                "online_quant_config has a part twice");
  legacy_config c;
  with_part<is_global_part, Parts...>(
      [&]<class P>(P) { c.global_scheme = lower_scheme<typename P::scheme>(e, "global_scheme"); });
  with_part<is_linear_override_part, Parts...>(
      [&]<class P>(P) { c.linear_scheme_override = lower_scheme<typename P::scheme>(e, "linear_scheme_override"); });
  with_part<is_moe_override_part, Parts...>(
      [&]<class P>(P) { c.moe_scheme_override = lower_scheme<typename P::scheme>(e, "moe_scheme_override"); });
  with_part<is_ignore_part, Parts...>([&]<class P>(P) { c.ignore = lower_ignore(P{}); });
  return c;
}

template <class P>
struct policy_of {
  using type = policy<online, P>;  // a config type alone
};
template <method M>
struct policy_of<method_tag<M>> {
  using type = policy<method_tag<M>, void>;
};
template <shorthand S>
struct policy_of<shorthand_tag<S>> {
  using type = policy<shorthand_tag<S>, void>;
};
template <class Q, class C, class R>
struct policy_of<policy<Q, C, R>> {
  using type = policy<Q, C, R>;
};

template <class Q, class C, class Release>
constexpr outcome<resolved_config> lower_policy(policy<Q, C, Release>) {
  using R = outcome<resolved_config>;
  constexpr vllm_release r = Release::id;
  const maybe<std::string> q = std::string(Q::name);
  field_errors e;
  if constexpr (is_instance<C, online_quant_config>) {
    if (auto d = check_legacy_quantization(q, true, legacy_global(C{}))) return R{std::nullopt, *d};
    auto cfg = lower_config(e, C{});
    if (!e.errors.empty()) return R{std::nullopt, e.errors.front()};
    return R{resolve_legacy_values(q, cfg), std::nullopt};
  } else if constexpr (std::is_void_v<C>) {
    return resolve_current(q, std::nullopt, r);
  } else {
    static_assert(is_instance<C, quant_config>, "a policy's config is a quant_config<...> or an online_quant_config<...>");
    auto cfg = lower_config(e, C{}, r);
    if (!e.errors.empty()) return R{std::nullopt, e.errors.front()};
    if (auto d = check_mutual_exclusion(cfg)) return R{std::nullopt, *d};
    return resolve_current(q, cfg, r);
  }
}

}  // namespace detail

/// The plain config a policy type stands for (resolve_quantization_config applied), or the error the
/// JSON front end raises for the same config. Usable at run time and during constant evaluation.
template <class Policy>
constexpr outcome<resolved_config> lower() {
  return detail::lower_policy(typename detail::policy_of<Policy>::type{});
}

/// The lowered config; throws config_error with the front ends' message.
template <class Policy>
resolved_config to_runtime() {
  auto r = lower<Policy>();
  if (r.error) throw config_error(*r.error);
  return std::move(*r.value);
}

}  // namespace qpolicy
