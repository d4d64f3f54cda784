#pragma once
// Compile-time model definitions as values: a few layer records ("{i}" marks the block index) and one
// small reference per layer, not a type per layer, so a thousand layers cost an array, not a thousand
// instantiations.
//   constexpr auto block = qp::block(qp::linear("model.layers.{i}.mlp.down_proj", "RowParallelLinear", {4096, 14336}));
//   constexpr auto llama = qp::model("llama", qp::packed("qkv_proj", {"q_proj", "k_proj", "v_proj"}),
//                                    qp::repeat<32>(block), qp::other("lm_head", "ParallelLMHead"));
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include "qpolicy/config/config.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/keys/quant_key.hpp"
#include "qpolicy/model/model.hpp"
#include "qpolicy/model/detail/model_rules.hpp"

namespace qpolicy {

/// One layer record of a definition; "{i}" in the name stands for the block index.
struct layer_def {
  std::string_view name, class_name;
  layer_kind kind = layer_kind::other;
  bool quantizable = true;
  std::int64_t out_features = 0, in_features = 0;  // 0: not given
  std::array<std::int64_t, 8> shard_sizes{};
  std::uint8_t shard_count = 0;
  std::int64_t num_experts = 0, hidden_size = 0, intermediate_size = 0;
  std::int8_t bias = -1;  // -1: not given

  /// The same layer, not quantizable (a router gate, say).
  constexpr layer_def not_quantizable() const {
    layer_def d = *this;
    d.quantizable = false;
    return d;
  }
  /// The same fused layer with its shards' out_features.
  constexpr layer_def with_shards(std::initializer_list<std::int64_t> sizes) const {
    layer_def d = *this;
    d.shard_count = 0;
    for (auto s : sizes) d.shard_sizes[d.shard_count++ & 7] = s;  // more than 8 is reported by validate
    return d;
  }
  constexpr layer_def with_bias(bool b) const {
    layer_def d = *this;
    d.bias = b ? 1 : 0;
    return d;
  }
  /// Where "{i}" is in the name (npos when the name has none).
  constexpr std::size_t index_at() const { return name.find("{i}"); }
};

/// A linear layer: vLLM name, class, and optionally {out_features, in_features}.
constexpr layer_def linear(std::string_view name, std::string_view class_name, std::array<std::int64_t, 2> shape = {}) {
  layer_def d{name, class_name, layer_kind::linear};
  d.out_features = shape[0];
  d.in_features = shape[1];
  return d;
}
/// A fused-experts layer with E experts, hidden size H and intermediate size I.
constexpr layer_def moe(std::string_view name, std::string_view class_name, std::int64_t experts, std::int64_t hidden,
                        std::int64_t intermediate) {
  layer_def d{name, class_name, layer_kind::moe};
  d.num_experts = experts;
  d.hidden_size = hidden;
  d.intermediate_size = intermediate;
  return d;
}
/// A layer online quantization does not handle (embeddings, heads, norms), for targets and plans.
constexpr layer_def other(std::string_view name, std::string_view class_name, std::array<std::int64_t, 2> shape = {}) {
  layer_def d{name, class_name, layer_kind::other};
  d.out_features = shape[0];
  d.in_features = shape[1];
  return d;
}

/// Layers that repeat per block, in order.
template <std::size_t K>
struct block_def {
  std::array<layer_def, K> layers;
};
namespace detail {
template <class Part>
struct block_size : std::integral_constant<std::size_t, 1> {};
template <std::size_t K>
struct block_size<block_def<K>> : std::integral_constant<std::size_t, K> {};
template <std::size_t K>
constexpr void append(block_def<K>& b, std::size_t& n, const layer_def& d) {
  b.layers[n++] = d;
}
template <std::size_t K, std::size_t J>
constexpr void append(block_def<K>& b, std::size_t& n, const block_def<J>& inner) {
  for (const auto& d : inner.layers) b.layers[n++] = d;
}
}  // namespace detail

/// A block from layers and smaller blocks (an attention block shared by two kinds of blocks, say).
template <class... Parts>
constexpr auto block(Parts... parts) {
  block_def<(std::size_t{0} + ... + detail::block_size<Parts>::value)> b{};
  std::size_t n = 0;
  (detail::append(b, n, parts), ...);
  return b;
}

/// N copies of a block with indices first, first+1, ...
template <std::size_t N, std::size_t K>
struct repeat_def {
  block_def<K> body;
  std::int32_t first = 0;
};
template <std::size_t N, std::size_t K>
constexpr repeat_def<N, K> repeat(const block_def<K>& body, std::int32_t first = 0) {
  return {body, first};
}

/// packed_modules_mapping entry: a fused last name component and its shards (at most 8).
struct packed_entry {
  std::string_view fused;
  std::array<std::string_view, 8> shards{};
  std::uint8_t count = 0;
};
template <std::size_t S>
constexpr packed_entry packed(std::string_view fused, const std::string_view (&shards)[S]) {
  static_assert(S <= 8, "packed_modules_mapping entries take at most 8 shards");
  packed_entry p{fused};
  for (std::size_t i = 0; i < S; ++i) p.shards[i] = shards[i];
  p.count = static_cast<std::uint8_t>(S);
  return p;
}

/// One layer of the model: which record, and its block index (-1 outside repeats).
struct layer_ref {
  std::uint16_t def = 0;
  std::int32_t index = -1;
};

/// A whole model definition: D layer records, L layers, P packed entries.
template <std::size_t D, std::size_t L, std::size_t P>
struct model_def {
  std::string_view name;
  std::array<packed_entry, P> packed{};
  std::array<layer_def, D> defs{};
  std::array<layer_ref, L> layers{};

  static constexpr std::size_t size() { return L; }
  constexpr const layer_def& def_of(std::size_t layer) const { return defs[layers[layer].def]; }

  /// Layer `layer`'s name, "{i}" replaced by its index.
  constexpr std::string name_of(std::size_t layer) const {
    std::string out;
    name_into(out, layer);
    return out;
  }
  /// Writes layer `layer`'s name into `out`, reusing its storage (the compile-time planner's loop).
  constexpr void name_into(std::string& out, std::size_t layer) const {
    const auto& d = def_of(layer);
    const auto at = d.index_at();
    if (at == std::string_view::npos || layers[layer].index < 0) {
      out.assign(d.name);
      return;
    }
    char digits[12]{};
    std::size_t n = 0;
    for (auto v = layers[layer].index; n == 0 || v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
    out.resize(d.name.size() - 3 + n);
    char* p = out.data();
    const char* name = d.name.data();
    std::size_t k = 0;
    for (std::size_t j = 0; j < at; ++j) p[k++] = name[j];
    while (n > 0) p[k++] = digits[--n];
    for (std::size_t j = at + 3, e = d.name.size(); j < e; ++j) p[k++] = name[j];
  }
  /// Whether layer `layer` is called `name` (no allocation: usable in many static_asserts).
  constexpr bool is_named(std::size_t layer, std::string_view name) const {
    const auto& d = def_of(layer);
    const auto at = d.index_at();
    if (at == std::string_view::npos || layers[layer].index < 0) return d.name == name;
    const auto prefix = d.name.substr(0, at), suffix = d.name.substr(at + 3);
    if (name.size() <= prefix.size() + suffix.size() || name.substr(0, prefix.size()) != prefix ||
        name.substr(name.size() - suffix.size()) != suffix)
      return false;
    const auto digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    std::int64_t v = 0;
    for (char c : digits) {
      if (c < '0' || c > '9' || v > (1 << 30)) return false;
      v = v * 10 + (c - '0');
    }
    return (digits.size() == 1 || digits[0] != '0') && v == layers[layer].index;
  }
  /// The index of the layer called `name`, or -1.
  constexpr std::int64_t find(std::string_view name) const {
    for (std::size_t i = 0; i < L; ++i)
      if (is_named(i, name)) return static_cast<std::int64_t>(i);
    return -1;
  }
};

namespace detail {
template <class Part>
struct part_size;  // defs, layers, packed entries a part contributes
template <>
struct part_size<layer_def> {
  static constexpr std::size_t defs = 1, layers = 1, packed = 0;
};
template <std::size_t K>
struct part_size<block_def<K>> {
  static constexpr std::size_t defs = K, layers = K, packed = 0;
};
template <std::size_t N, std::size_t K>
struct part_size<repeat_def<N, K>> {
  static constexpr std::size_t defs = K, layers = N * K, packed = 0;
};
template <>
struct part_size<packed_entry> {
  static constexpr std::size_t defs = 0, layers = 0, packed = 1;
};

template <std::size_t D, std::size_t L, std::size_t P>
struct model_builder {
  model_def<D, L, P> m;
  std::size_t defs = 0, layers = 0, packed = 0;

  constexpr void add(const packed_entry& p) { m.packed[packed++] = p; }
  constexpr void add(const layer_def& d) {
    m.defs[defs] = d;
    m.layers[layers++] = {static_cast<std::uint16_t>(defs++), -1};
  }
  template <std::size_t K>
  constexpr void add(const block_def<K>& b) {
    for (const auto& d : b.layers) add(d);
  }
  template <std::size_t N, std::size_t K>
  constexpr void add(const repeat_def<N, K>& r) {
    for (std::size_t k = 0; k < K; ++k) m.defs[defs + k] = r.body.layers[k];
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t k = 0; k < K; ++k)
        m.layers[layers++] = {static_cast<std::uint16_t>(defs + k), r.first + static_cast<std::int32_t>(i)};
    defs += K;
  }
};
}  // namespace detail

/// A model definition from its parts (packed entries, layers, blocks, repeats) in construction order.
template <class... Parts>
constexpr auto model(std::string_view name, Parts... parts) {
  using namespace detail;
  constexpr std::size_t D = (std::size_t{0} + ... + part_size<Parts>::defs);
  constexpr std::size_t L = (std::size_t{0} + ... + part_size<Parts>::layers);
  constexpr std::size_t P = (std::size_t{0} + ... + part_size<Parts>::packed);
  static_assert(D < 65536, "a model definition holds at most 65535 layer records");
  model_builder<D, L, P> b;
  b.m.name = name;
  (b.add(parts), ...);
  return b.m;
}

/// A model definition without a name.
template <class First, class... Parts>
  requires(!std::is_convertible_v<First, std::string_view>)
constexpr auto model(First first, Parts... parts) {
  return model(std::string_view{}, first, parts...);
}

/// Checks a definition as the model reader checks a file: names, classes, sizes, shards, "{i}" only
/// inside repeats. Returns the first problem as "LOC: MESSAGE", or "".
template <std::size_t D, std::size_t L, std::size_t P>
constexpr std::string validate(const model_def<D, L, P>& m) {
  // Messages are made only on failure, and "{i}" is looked for once per record, not per layer: both
  // matter during constant evaluation.
  bool has_slot[D + 1]{};
  for (std::size_t k = 0; k < D; ++k) {
    const auto& d = m.defs[k];
    const auto where = [&] { return "layer " + text::py_repr(d.name); };
    has_slot[k] = d.index_at() != std::string_view::npos;
    if (d.name.empty()) return "model definition: " + std::string(empty_layer_name_message);
    if (d.class_name.empty()) return where() + ": " + std::string(empty_layer_class_message);
    if (d.out_features < 0 || d.in_features < 0 || d.num_experts < 0 || d.hidden_size < 0 || d.intermediate_size < 0)
      return where() + ": sizes must be positive";
    if (d.shard_count > 8) return where() + ": at most 8 shard sizes";
    if (const auto at = d.index_at(); at != std::string_view::npos && d.name.find("{i}", at + 3) != std::string_view::npos)
      return where() + ": \"{i}\" may appear once in a layer name";
    for (std::size_t s = 0; s < d.shard_count; ++s)
      if (d.shard_sizes[s] <= 0) return where() + ": shard sizes must be positive";
    if (d.shard_count)
      if (auto why = shard_sum_problem(std::span(d.shard_sizes.data(), d.shard_count), d.out_features); !why.empty())
        return where() + ": " + why;
  }
  // One test per layer, through a raw pointer: this loop runs over every layer of the model.
  const layer_ref* refs = m.layers.data();
  for (std::size_t i = 0; i < L; ++i) {
    if (has_slot[refs[i].def] == (refs[i].index >= 0)) continue;
    if (has_slot[refs[i].def])
      return "layer " + text::py_repr(m.def_of(i).name) + ": \"{i}\" is only meaningful inside qp::repeat";
    return "layer " + text::py_repr(m.def_of(i).name) + " is inside qp::repeat but has no \"{i}\", so its copies share one name";
  }
  return {};
}

/// How much of a layer describe_layer fills: what the planner reads, or everything MODEL.json holds.
enum class layer_detail : std::uint8_t { for_planning, with_sizes };

/// Layer `i` of a definition as MODEL.json would describe it.
template <std::size_t D, std::size_t L, std::size_t P>
constexpr layer_desc describe_layer(const model_def<D, L, P>& m, std::size_t i, layer_detail detail) {
  const auto& d = m.def_of(i);
  layer_desc l;
  l.name = m.name_of(i);
  l.class_name = std::string(d.class_name);
  l.kind = d.kind;
  l.quantizable = d.quantizable;
  if (detail == layer_detail::for_planning) return l;  // sizes cost steps during constant evaluation
  if (d.out_features > 0) l.shape = {d.out_features, d.in_features};
  l.shard_sizes.assign(d.shard_sizes.begin(), d.shard_sizes.begin() + d.shard_count);
  if (d.num_experts > 0) l.num_experts = d.num_experts;
  if (d.hidden_size > 0) l.hidden_size = d.hidden_size;
  if (d.intermediate_size > 0) l.intermediate_size = d.intermediate_size;
  if (d.bias >= 0) l.bias = d.bias == 1;
  return l;
}

/// The definition as the runtime model description (what MODEL.json gives).
template <std::size_t D, std::size_t L, std::size_t P>
model_desc to_runtime(const model_def<D, L, P>& m) {
  if (auto e = validate(m); !e.empty()) throw config_error("", e);
  model_desc out;
  out.name = std::string(m.name);
  for (const auto& p : m.packed) {
    packed_mapping pm{std::string(p.fused), {}};
    for (std::size_t s = 0; s < p.count; ++s) pm.shards.emplace_back(p.shards[s]);
    out.packed.push_back(std::move(pm));
  }
  out.layers.reserve(L);
  for (std::size_t i = 0; i < L; ++i) out.layers.push_back(describe_layer(m, i, layer_detail::with_sizes));
  return out;
}

}  // namespace qpolicy
