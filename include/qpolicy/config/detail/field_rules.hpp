#pragma once
// The field rules of a config, once for both front ends: the JSON builder (src/json/config_json.cpp)
// and the typed front end (typed/typed_config.hpp) read their input their own way, then hand each
// field's value (its name and its Python repr) to these rules, which collect pydantic's field
// errors in order. constexpr: the typed front end runs them during constant evaluation.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qpolicy/config/config.hpp"
#include "qpolicy/match/pattern.hpp"

namespace qpolicy {

/// Field errors in pydantic's order.
struct field_errors {
  std::vector<diagnostic> errors;
  // By const reference: GCC 12 misreads moved-from by-value strings during constant evaluation.
  constexpr void add(const std::string& loc, const std::string& message) { errors.push_back(diagnostic{loc, message}); }
};

// Each rule takes a string value as it was given; its Python repr is made only for a message.

/// A spec field (`linear.weight`, `moe.activation`) given as a key name: the key, or a field error at
/// `loc` naming the value.
constexpr std::optional<key_id> spec_field_key(field_errors& e, const std::string& loc, std::string_view name, key_field field,
                                               vllm_release r) {
  if (auto k = find_key(name, field, r)) return k;
  e.add(loc, unknown_quantization_name_message(text::py_repr(name), r));
  return std::nullopt;
}

/// A spec given as a string (`"linear": "fp8_per_block"`): a shorthand fills the slot of `field`, a
/// key name is the weight.
constexpr std::optional<quant_spec> spec_from_name(field_errors& e, layer_kind field, std::string_view name, vllm_release r) {
  if (auto sh = find_shorthand(name, r)) {
    auto slot = shorthand_slot(*sh, field, r);
    if (slot.error) e.add(slot.error->loc, slot.error->message);
    return slot.value;
  }
  if (auto k = find_key(name, key_field::plain, r)) return quant_spec{k, std::nullopt, true, false};
  e.add(std::string(to_string(field)), unknown_quantization_name_message(text::py_repr(name), r));
  return std::nullopt;
}

/// QuantSpec.hadamard_size after pydantic's integer conversion (0.34): a power of two, or a field
/// error naming the value.
constexpr std::int64_t hadamard_field(field_errors& e, const std::string& loc, std::int64_t size) {
  if (size <= 0 || (size & (size - 1))) {
    e.add(loc, hadamard_not_power_of_two_message(text::to_decimal(static_cast<long long>(size))));
    return 0;
  }
  return size;
}

/// A targets value given as a string: a shorthand of the release, or a field error. Before 0.34 every
/// value goes here (`is_string` false for the others; `str_of_value` is str() of the value).
constexpr std::optional<shorthand> target_shorthand(field_errors& e, const std::string& pattern, bool is_string,
                                                    std::string_view name, std::string_view str_of_value, vllm_release r) {
  const auto sh = is_string ? find_shorthand(name, r) : std::nullopt;
  if (!sh) e.add("targets", targets_not_shorthand_message(pattern, str_of_value, r));
  return sh;
}

/// A targets pattern: a `re:` pattern must compile. False after a field error.
constexpr bool target_pattern(field_errors& e, const std::string& pattern) {
  if (match::is_regex_pattern(pattern)) {
    match::program prog;
    if (auto err = match::compile_regex(prog, std::string_view(pattern).substr(3), 0, match::anchoring::prefix)) {
      e.add("targets", targets_bad_regex_message(pattern, err->message));
      return false;
    }
  }
  return true;
}

/// A legacy scheme field (`global_scheme`, `linear_scheme_override`, `moe_scheme_override`) given as a
/// string: the scheme, or a field error naming the value.
constexpr std::optional<legacy_scheme> legacy_scheme_field(field_errors& e, const std::string& field, std::string_view name) {
  if (auto s = find_legacy_scheme(name)) return s;
  e.add(field, legacy_not_a_scheme_message(text::py_repr(name)));
  return std::nullopt;
}

/// The message of a legacy scheme field that is not a string: pydantic's literal-choice error.
constexpr std::string legacy_scheme_type_message() {
  std::string out = "Input should be ";
  for (std::size_t i = 0; i < legacy_scheme_table.size(); ++i) {
    if (i) out += i + 1 == legacy_scheme_table.size() ? " or " : ", ";
    out += text::py_repr(legacy_scheme_table[i].name);
  }
  return out;
}

/// quantization_config['global_scheme'] given as a string (present and not null), for the checks
/// against `quantization`: a scheme, or another string. (Another value is other_value, with its repr.)
constexpr legacy_global_field classify_legacy_global(std::string_view name) {
  using k = legacy_global_field::kind;
  if (auto s = find_legacy_scheme(name)) return {k::scheme, *s, {}};
  return {k::other_string, {}, text::py_repr(name)};
}

}  // namespace qpolicy
