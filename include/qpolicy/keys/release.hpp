#pragma once
// vLLM's releases as data (spec §9): one row per release -- its key names, its shorthands, its family
// -- and one row per family of rules. Every release-dependent name lookup and rule reads these rows;
// adding a release is a row here plus its cases.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "qpolicy/keys/quant_key.hpp"

namespace qpolicy {

/// A vLLM release (major.minor) whose behaviour to follow.
enum class vllm_release : std::uint8_t { v0_30, v0_31, v0_32, v0_33, v0_34 };

/// The releases' two families of config rules.
enum class release_family : std::uint8_t {
  or_merge,    // 0.30-0.33 (§9.2): `cfg.linear or base.linear`, no fields_set, explicit activations refused
  fields_set,  // 0.34 (§9.4): field-by-field merge over fields_set, spec-valued targets, hadamard_size
};

/// The rules of a family: what QuantSpec, the merge, targets and the online methods do.
struct family_rules {
  release_family id;
  bool fields_set;         // QuantSpec records the fields written; merge_quantization_config merges by them
  bool weight_only_names;  // `weight: "mxfp8"|"mxfp4"` name the static keys (_WEIGHT_QUANT_KEY_NAMES)
  bool spec_targets;       // a targets value may be a spec object
  bool hadamard_size;      // QuantSpec.hadamard_size exists
  bool activation_opt_in;  // methods opt in to an explicit activation (else any non-None one is refused)
  bool defer_with_config;  // `-q mxfp4|mxfp8` with a config returns the config unmerged
  key_id mxfp8_key;        // the MXFP8 key of the mxfp8 shorthand and of the dispatch tables
};

inline constexpr auto family_table = std::to_array<family_rules>({
    {release_family::or_merge, false, false, false, false, false, false, key_id::mxfp8_dynamic},
    {release_family::fields_set, true, true, true, true, true, true, key_id::mxfp8_static},
});

/// A set of keys or shorthands, one bit per id.
using id_set = std::uint32_t;
template <class Id>
constexpr id_set ids(std::initializer_list<Id> list) {
  id_set s = 0;
  for (auto id : list) s |= id_set{1} << static_cast<unsigned>(id);
  return s;
}
template <class Id>
constexpr bool holds(id_set s, Id id) { return (s >> static_cast<unsigned>(id)) & 1u; }

/// One release: its name, its family, its QUANT_KEY_NAMES and its online shorthands.
struct release_row {
  vllm_release id;
  std::string_view name;
  release_family family;
  id_set key_names;   // key_ids named in its QUANT_KEY_NAMES
  id_set shorthands;  // its _ONLINE_SHORTHANDS
};

namespace detail::release_ids {
using k = key_id;
using s = shorthand;
inline constexpr id_set keys_0_30 = ids({k::fp8_per_tensor_static, k::fp8_per_tensor_dynamic, k::fp8_per_token,
                                         k::fp8_per_channel_static, k::fp8_per_block_static, k::fp8_per_block_dynamic,
                                         k::mxfp8_dynamic, k::mxfp4_dynamic, k::int8_per_channel_static});
inline constexpr id_set keys_0_32 = keys_0_30 | ids({k::nvfp4_per_token, k::int4_per_group_32});
inline constexpr id_set keys_0_33 = keys_0_32 | ids({k::int8_per_group_32});
inline constexpr id_set keys_0_34 = keys_0_33 | ids({k::lut_b});
inline constexpr id_set shorthands_0_30 = ids({s::fp8_per_tensor, s::fp8_per_block, s::fp8_per_channel, s::mxfp8, s::mxfp4,
                                               s::int8_per_channel_weight_only, s::nvfp4_per_token});
inline constexpr id_set shorthands_0_34 = shorthands_0_30 | ids({s::mxfp4_hadamard32, s::lut_b_moe});
}  // namespace detail::release_ids

// In release order; the last row is the newest, the default.
namespace ri = detail::release_ids;
inline constexpr auto release_table = std::to_array<release_row>({
    {vllm_release::v0_30, "0.30", release_family::or_merge, ri::keys_0_30, ri::shorthands_0_30},
    {vllm_release::v0_31, "0.31", release_family::or_merge, ri::keys_0_30, ri::shorthands_0_30},
    {vllm_release::v0_32, "0.32", release_family::or_merge, ri::keys_0_32, ri::shorthands_0_30},
    {vllm_release::v0_33, "0.33", release_family::or_merge, ri::keys_0_33, ri::shorthands_0_30},
    {vllm_release::v0_34, "0.34", release_family::fields_set, ri::keys_0_34, ri::shorthands_0_34},
});
inline constexpr std::size_t release_count = release_table.size();
static_assert(release_table[release_count - 1].id == static_cast<vllm_release>(release_count - 1),
              "release_table has one row per release, in order");
/// The newest release qpolicy knows: the default everywhere.
inline constexpr vllm_release newest_release = release_table[release_count - 1].id;

constexpr const release_row& entry(vllm_release r) { return release_table[static_cast<std::size_t>(r)]; }
constexpr const family_rules& rules(vllm_release r) { return family_table[static_cast<std::size_t>(entry(r).family)]; }
constexpr std::string_view to_string(vllm_release r) { return entry(r).name; }
constexpr std::optional<vllm_release> find_release(std::string_view name) { return find_by_name(release_table, name); }

/// The known releases, as `--vllm`'s error lists them: ['0.30', '0.31', ...].
constexpr std::string release_names_repr() {
  std::array<std::string_view, release_count> names{};
  for (std::size_t i = 0; i < release_count; ++i) names[i] = release_table[i].name;
  return text::py_repr_list(std::span<const std::string_view>(names));
}

/// A key as release r holds it: MXFP8 is the release's MXFP8 key (dynamic before 0.34).
constexpr key_id release_key(key_id k, vllm_release r) { return k == key_id::mxfp8_static ? rules(r).mxfp8_key : k; }

/// Whether release r names key k: in its QUANT_KEY_NAMES, or as a weight-only name where it has those.
constexpr bool has_name(key_id k, vllm_release r) {
  const auto& e = entry(k);
  return (e.naming == key_naming::quant_key_names && holds(entry(r).key_names, k)) ||
         (e.naming == key_naming::weight_only && rules(r).weight_only_names);
}

/// A key's name in release r (vLLM's quant_key_name / quant_key_str): its name where the release has
/// one, else its printed form.
constexpr std::string key_name(key_id k, vllm_release r) {
  // if/else, not ?: -- GCC 12 destroys a ?: string temporary twice during constant evaluation.
  if (has_name(k, r)) return std::string(entry(k).name);
  return to_string(entry(k).key);
}

/// Exact, case-sensitive lookup of a key name for a spec field in release r.
constexpr std::optional<key_id> find_key(std::string_view name, key_field field, vllm_release r) {
  if (field == key_field::weight && rules(r).weight_only_names)
    for (const auto& e : key_table)
      if (e.naming == key_naming::weight_only && e.name == name) return e.id;
  for (const auto& e : key_table)
    if (e.naming == key_naming::quant_key_names && holds(entry(r).key_names, e.id) && e.name == name) return e.id;
  return std::nullopt;
}

/// The release's sorted QUANT_KEY_NAMES, as the unknown-name message lists them.
constexpr std::string quant_key_names_repr(vllm_release r) {
  std::array<std::string_view, key_count> names{};
  std::size_t n = 0;
  for (const auto& e : key_table)
    if (e.naming == key_naming::quant_key_names && holds(entry(r).key_names, e.id)) names[n++] = e.name;
  return sorted_names_repr(std::span<const std::string_view>(names.data(), n));
}

/// A shorthand of release r by name.
constexpr std::optional<shorthand> find_shorthand(std::string_view name, vllm_release r) {
  auto s = find_by_name(shorthand_table, name);
  if (s && !holds(entry(r).shorthands, *s)) return std::nullopt;
  return s;
}

/// The release's sorted shorthand names, as the targets message lists them.
constexpr std::string shorthand_names_repr(vllm_release r) {
  std::array<std::string_view, shorthand_count> names{};
  std::size_t n = 0;
  for (const auto& e : shorthand_table)
    if (holds(entry(r).shorthands, e.id)) names[n++] = e.name;
  return sorted_names_repr(std::span<const std::string_view>(names.data(), n));
}

/// A shorthand's slot weight for a layer kind in release r (none when the slot is None).
constexpr std::optional<key_id> shorthand_weight(shorthand s, layer_kind kind, vllm_release r) {
  const auto& k = kind == layer_kind::linear ? entry(s).linear_weight : entry(s).moe_weight;
  if (!k) return std::nullopt;
  return release_key(*k, r);
}

/// How `-q` names are classified by resolve_quantization_config: online shorthands and "online".
constexpr bool is_online_name(std::string_view q, vllm_release r) {
  return q == "online" || find_shorthand(q, r).has_value();
}

}  // namespace qpolicy
