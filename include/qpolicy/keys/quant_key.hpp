#pragma once
// The vocabulary (spec §2, §3.3, §3.6, §5): quant keys with their printed forms and names, the online
// shorthands, the legacy schemes and the plan's methods. One constexpr table per vocabulary; every
// string<->id conversion in the project goes through these tables.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "qpolicy/core/detail/text.hpp"

namespace qpolicy {

/// Element types of quantized data and scales.
enum class dtype : std::uint8_t { f8e4m3fn, u8, i8, f32, f16, uint4b8 };

constexpr std::string_view to_string(dtype d) {
  constexpr std::array<std::string_view, 6> names{"f8e4m3fn", "u8", "i8", "f32", "f16", "uint4b8"};
  return names[static_cast<std::size_t>(d)];
}

/// How many elements share one scale: (-1,-1) per tensor, (1,-1) per token, (-1,1) per channel, else a block.
struct group_shape {
  std::int32_t row = -1, col = -1;
  constexpr bool operator==(const group_shape&) const = default;
};
inline constexpr group_shape per_tensor{-1, -1};
inline constexpr group_shape per_token{1, -1};
inline constexpr group_shape per_channel{-1, 1};

constexpr std::string to_string(group_shape g) {
  if (g == per_tensor) return "per_tensor";
  if (g == per_token) return "per_token";
  if (g == per_channel) return "per_channel";
  return "GroupShape(row=" + text::to_decimal(g.row) + ", col=" + text::to_decimal(g.col) + ")";
}

/// A scale's type, whether it is computed ahead (static) or per call (dynamic), and its grouping.
struct scale_desc {
  dtype type = dtype::f32;
  bool is_static = true;
  group_shape group{};
  constexpr bool operator==(const scale_desc&) const = default;
};

constexpr std::string to_string(const scale_desc& s) {
  return std::string(to_string(s.type)) + "," + (s.is_static ? "static" : "dynamic") + "," + to_string(s.group);
}

/// A quantization key: data type, scale, optional second-level scale, symmetric.
struct quant_key {
  dtype data = dtype::f8e4m3fn;
  scale_desc scale{};
  std::optional<scale_desc> scale2{};
  bool symmetric = true;
  constexpr bool operator==(const quant_key&) const = default;
};

/// Printed form: QuantKey(f8e4m3fn,scale(f32,static,per_tensor),symmetric).
constexpr std::string to_string(const quant_key& k) {
  std::string out = "QuantKey(" + std::string(to_string(k.data)) + ",scale(" + to_string(k.scale) + ")";
  if (k.scale2) out += ",scale2(" + to_string(*k.scale2) + ")";
  return out + (k.symmetric ? ",symmetric)" : ",asymmetric)");
}

/// Every key a config can name, in vLLM's QUANT_KEY_NAMES order of the newest release, then the keys
/// named only on the weight side, then the nameless ones. Which of them a release names is the
/// release's (keys/release.hpp).
enum class key_id : std::uint8_t {
  fp8_per_tensor_static,
  fp8_per_tensor_dynamic,
  fp8_per_token,
  fp8_per_channel_static,
  fp8_per_block_static,
  fp8_per_block_dynamic,
  mxfp8_dynamic,
  mxfp4_dynamic,
  int8_per_channel_static,
  mxfp8_static,
  mxfp4_static,
  nvfp4,
  nvfp4_per_token,
  int8_per_group_32,
  int4_per_group_32,
  lut_b,
};

/// How a key is named: in QUANT_KEY_NAMES (where its release lists it), only in the weight field
/// (_WEIGHT_QUANT_KEY_NAMES, where the release has those), or never (it prints its form).
enum class key_naming : std::uint8_t { quant_key_names, weight_only, nameless };

/// One row of the key table: the key, its name ("" when it has none) and how it is named.
struct key_entry {
  key_id id;
  std::string_view name;
  quant_key key;
  key_naming naming;
  bool online_method = true;  // false: a weight no online method takes, and no error (vLLM loads it elsewhere)
};

inline constexpr scale_desc f32_static_tensor{dtype::f32, true, per_tensor};
inline constexpr scale_desc f32_dynamic_token{dtype::f32, false, per_token};

inline constexpr auto key_table = std::to_array<key_entry>({
    {key_id::fp8_per_tensor_static, "fp8_per_tensor_static", {dtype::f8e4m3fn, f32_static_tensor}, key_naming::quant_key_names},
    {key_id::fp8_per_tensor_dynamic, "fp8_per_tensor_dynamic", {dtype::f8e4m3fn, {dtype::f32, false, per_tensor}}, key_naming::quant_key_names},
    {key_id::fp8_per_token, "fp8_per_token", {dtype::f8e4m3fn, f32_dynamic_token}, key_naming::quant_key_names},
    {key_id::fp8_per_channel_static, "fp8_per_channel_static", {dtype::f8e4m3fn, {dtype::f32, true, per_channel}}, key_naming::quant_key_names},
    {key_id::fp8_per_block_static, "fp8_per_block_static", {dtype::f8e4m3fn, {dtype::f32, true, {128, 128}}}, key_naming::quant_key_names},
    {key_id::fp8_per_block_dynamic, "fp8_per_block_dynamic", {dtype::f8e4m3fn, {dtype::f32, false, {1, 128}}}, key_naming::quant_key_names},
    {key_id::mxfp8_dynamic, "mxfp8", {dtype::f8e4m3fn, {dtype::u8, false, {1, 32}}}, key_naming::quant_key_names},
    {key_id::mxfp4_dynamic, "mxfp4", {dtype::u8, {dtype::u8, false, {1, 32}}}, key_naming::quant_key_names},
    {key_id::int8_per_channel_static, "int8_per_channel_static", {dtype::i8, {dtype::f32, true, per_channel}}, key_naming::quant_key_names},
    {key_id::mxfp8_static, "mxfp8", {dtype::f8e4m3fn, {dtype::u8, true, {1, 32}}}, key_naming::weight_only},
    {key_id::mxfp4_static, "mxfp4", {dtype::u8, {dtype::u8, true, {1, 32}}}, key_naming::weight_only},
    {key_id::nvfp4, "", {dtype::u8, {dtype::f8e4m3fn, true, {1, 16}}, f32_static_tensor}, key_naming::nameless},
    {key_id::nvfp4_per_token, "nvfp4_per_token", {dtype::u8, {dtype::f8e4m3fn, false, {1, 16}}, f32_dynamic_token},
     key_naming::quant_key_names},
    {key_id::int8_per_group_32, "int8_per_group_32", {dtype::i8, {dtype::f32, false, {1, 32}}}, key_naming::quant_key_names},
    // Loaded by vLLM's checkpoint MXFP4 method (gfx942), not by an online one.
    {key_id::int4_per_group_32, "int4_per_group_32", {dtype::uint4b8, {dtype::f16, true, {1, 32}}},
     key_naming::quant_key_names, false},
    {key_id::lut_b, "lut_b", {dtype::u8, {dtype::f8e4m3fn, true, {8, 64}}}, key_naming::quant_key_names},
});
/// How many keys there are: the table's rows, one per key_id in its order.
inline constexpr std::size_t key_count = key_table.size();
static_assert(key_table[key_count - 1].id == static_cast<key_id>(key_count - 1), "key_table has one row per key_id, in order");

constexpr const key_entry& entry(key_id k) { return key_table[static_cast<std::size_t>(k)]; }
constexpr const quant_key& key_of(key_id k) { return entry(k).key; }

/// A key's printed form, as `{key}` in vLLM's messages.
constexpr std::string key_repr(key_id k) { return to_string(entry(k).key); }

/// Which names a spec field accepts: `weight` prefers the weight-only keys for mxfp8/mxfp4 (where the
/// release has them).
enum class key_field : std::uint8_t { weight, activation, plain };

/// The id of the row of `table` named `name` (exact, case-sensitive), as every vocabulary looks names up.
template <class Row, std::size_t N>
constexpr auto find_by_name(const std::array<Row, N>& table, std::string_view name) -> std::optional<decltype(Row::id)> {
  for (const auto& row : table)
    if (row.name == name) return row.id;
  return std::nullopt;
}

/// Python's repr of sorted(names) for up to 16 distinct names, as vLLM's messages list them.
template <class Names>
constexpr std::string sorted_names_repr(const Names& names) {
  std::array<std::string_view, 16> sorted{};
  std::size_t n = 0;
  for (std::string_view name : names) {
    bool seen = false;
    for (std::size_t i = 0; i < n; ++i) seen = seen || sorted[i] == name;
    if (!seen) sorted[n++] = name;
  }
  for (std::size_t i = 1; i < n; ++i)  // insertion sort: constexpr and tiny
    for (std::size_t j = i; j > 0 && sorted[j] < sorted[j - 1]; --j) std::swap(sorted[j], sorted[j - 1]);
  return text::py_repr_list(std::span<const std::string_view>(sorted.data(), n));
}

/// The online shorthands of `-q` and of targets values (spec §3.3, §9.4), in vLLM's order. Which of
/// them a release has is the release's (keys/release.hpp).
enum class shorthand : std::uint8_t {
  fp8_per_tensor,
  fp8_per_block,
  fp8_per_channel,
  mxfp8,
  mxfp4,
  mxfp4_hadamard32,
  int8_per_channel_weight_only,
  nvfp4_per_token,
  lut_b_moe,
};
/// One shorthand: its name, the weight key of its linear and MoE slots (none when the slot is None)
/// and the Hadamard rotation of its linear slot (0: none).
struct shorthand_entry {
  shorthand id;
  std::string_view name;
  std::optional<key_id> linear_weight;
  std::optional<key_id> moe_weight;
  bool deferred;  // also a checkpoint method name: `-q` alone defers to the checkpoint
  std::int64_t linear_hadamard = 0;
};

// mxfp8's slots hold the release's MXFP8 key (release_key): static from 0.34, dynamic before.
inline constexpr auto shorthand_table = std::to_array<shorthand_entry>({
    {shorthand::fp8_per_tensor, "fp8_per_tensor", key_id::fp8_per_tensor_static, key_id::fp8_per_tensor_static, false},
    {shorthand::fp8_per_block, "fp8_per_block", key_id::fp8_per_block_static, key_id::fp8_per_block_static, false},
    {shorthand::fp8_per_channel, "fp8_per_channel", key_id::fp8_per_channel_static, key_id::fp8_per_channel_static, false},
    {shorthand::mxfp8, "mxfp8", key_id::mxfp8_static, key_id::mxfp8_static, true},
    {shorthand::mxfp4, "mxfp4", key_id::mxfp4_static, key_id::mxfp4_static, true},
    {shorthand::mxfp4_hadamard32, "mxfp4_hadamard32", key_id::mxfp4_static, std::nullopt, false, 32},
    {shorthand::int8_per_channel_weight_only, "int8_per_channel_weight_only", std::nullopt, key_id::int8_per_channel_static, false},
    {shorthand::nvfp4_per_token, "nvfp4_per_token", std::nullopt, key_id::nvfp4, false},
    {shorthand::lut_b_moe, "lut_b_moe", std::nullopt, key_id::lut_b, false},
});
inline constexpr std::size_t shorthand_count = shorthand_table.size();
static_assert(shorthand_table[shorthand_count - 1].id == static_cast<shorthand>(shorthand_count - 1),
              "shorthand_table has one row per shorthand, in order");

constexpr const shorthand_entry& entry(shorthand s) { return shorthand_table[static_cast<std::size_t>(s)]; }
constexpr std::string_view to_string(shorthand s) { return entry(s).name; }

/// The legacy OnlineQuantScheme.
enum class legacy_scheme : std::uint8_t { fp8_per_tensor, fp8_per_block };

/// One legacy scheme: its name and the weight key it stands for.
struct legacy_scheme_entry {
  legacy_scheme id;
  std::string_view name;
  key_id weight;
};
inline constexpr std::array<legacy_scheme_entry, 2> legacy_scheme_table{{
    {legacy_scheme::fp8_per_tensor, "fp8_per_tensor", key_id::fp8_per_tensor_static},
    {legacy_scheme::fp8_per_block, "fp8_per_block", key_id::fp8_per_block_static},
}};

constexpr const legacy_scheme_entry& entry(legacy_scheme s) { return legacy_scheme_table[static_cast<std::size_t>(s)]; }
constexpr std::string_view to_string(legacy_scheme s) { return entry(s).name; }
constexpr std::optional<legacy_scheme> find_legacy_scheme(std::string_view name) {
  return find_by_name(legacy_scheme_table, name);
}
/// The names `quantization` may have for a legacy config: "online" and the scheme names, sorted.
constexpr std::string legacy_online_names_repr() {
  std::array<std::string_view, legacy_scheme_table.size() + 1> names{};
  names[0] = "online";
  for (std::size_t i = 0; i < legacy_scheme_table.size(); ++i) names[i + 1] = legacy_scheme_table[i].name;
  return sorted_names_repr(names);
}

/// What a layer gets in the plan (spec §3.6); `none` prints as null. One name per value in
/// method_names, in order.
enum class method : std::uint8_t {
  none,
  unquantized,
  fp8_per_tensor,
  fp8_per_block,
  fp8_per_channel,
  mxfp8,
  mxfp4,
  int8_per_channel_weight_only,
  nvfp4_per_token,
  lut_b_moe,
};

/// The methods' printed names, in `method` order.
inline constexpr auto method_names = std::to_array<std::string_view>(
    {"null", "unquantized", "fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "mxfp8", "mxfp4",
     "int8_per_channel_weight_only", "nvfp4_per_token", "lut_b_moe"});
/// How many methods there are: one name each.
inline constexpr std::size_t method_count = method_names.size();

constexpr std::string_view to_string(method m) { return method_names[static_cast<std::size_t>(m)]; }

/// Layer kinds of a model description.
enum class layer_kind : std::uint8_t { linear, moe, other };

inline constexpr std::array<std::string_view, 3> layer_kind_names{"linear", "moe", "other"};

constexpr std::string_view to_string(layer_kind k) { return layer_kind_names[static_cast<std::size_t>(k)]; }
constexpr std::optional<layer_kind> find_layer_kind(std::string_view name) {
  for (std::size_t i = 0; i < layer_kind_names.size(); ++i)
    if (layer_kind_names[i] == name) return static_cast<layer_kind>(i);
  return std::nullopt;
}

}  // namespace qpolicy
