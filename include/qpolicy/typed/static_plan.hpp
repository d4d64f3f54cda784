#pragma once
// The compile-time plan: a policy type and a model definition in, one layer_plan per layer out, as a
// constexpr value usable in static_assert; any config, model or layer error of the runtime path is a
// compile error showing the same sentence.
//   constexpr auto& plan = qp::plan_for<policy, llama_8b>;
//   static_assert(plan["model.layers.5.mlp.down_proj"].method() == qp::method::fp8_per_block);
//
// Speed: GCC 12 evaluates about a million simple steps per second, so deciding each of a thousand
// layers on its own (strings, vectors) would take tens of seconds. The planner therefore decides one
// layer per group of layers the config cannot tell apart, with the runtime rules (plan_session) and
// the same compiled patterns: a layer "model.layers.{i}.x" is grouped by the lazy-DFA states its name
// (and its shards' names) reach after "model.layers.<i>" -- the rest of the name is the same for the
// whole group, so the DFA's answers, and with them every rule's outcome, are too. Per layer that is a
// few table steps over the digits of i.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "qpolicy/core/detail/buffer.hpp"
#include "qpolicy/core/detail/lean_vector.hpp"
#include "qpolicy/match/detail/dfa.hpp"
#include "qpolicy/plan/detail/planner.hpp"
#include "qpolicy/typed/model_def.hpp"
#include "qpolicy/typed/typed_config.hpp"

namespace qpolicy {

namespace detail {
// Not constexpr: reaching it during constant evaluation makes the lookup a compile error.
inline void no_layer_with_this_name_in_the_model(std::string_view) {}

/// How many patterns, and characters in them, a policy type can carry.
template <class T>
struct pattern_budget {
  static constexpr std::size_t count = 0, chars = 0;
};
template <class T>
  requires(is_ignore<T>)
struct pattern_budget<T> {
  static constexpr std::size_t count = T::count, chars = T::chars;
};
template <class... T>
struct pattern_budget<targets<T...>> {
  static constexpr std::size_t count = targets<T...>::count, chars = targets<T...>::chars;
};
template <template <class...> class C, class... Parts>
  requires(is_instance<C<Parts...>, quant_config> || is_instance<C<Parts...>, online_quant_config>)
struct pattern_budget<C<Parts...>> {
  static constexpr std::size_t count = (std::size_t{0} + ... + pattern_budget<Parts>::count);
  static constexpr std::size_t chars = (std::size_t{0} + ... + pattern_budget<Parts>::chars);
};
template <class Q, class C, class R>
struct pattern_budget<policy<Q, C, R>> : pattern_budget<C> {};
}  // namespace detail

/// A plan computed during compilation: the decisions of every layer of `Model`, the config's patterns.
template <class Model, std::size_t NPatterns, std::size_t NChars>
struct static_plan {
  static_assert(NPatterns < 0xFFFF, "a compile-time plan packs a layer's pattern index into 16 bits");
  const Model* model = nullptr;
  bool configured = false;
  vllm_release release = newest_release;
  // Per layer its layer_plan packed into 64 bits (operator[] unpacks it): a constant array of plain
  // integers is much cheaper for the compilers to build, copy and emit than one of structs holding
  // optionals (nvcc: about 0.1 s of the 1000-layer benchmark).
  std::array<std::uint64_t, Model::size()> codes{};
  std::array<char, NChars + 1> pattern_text{};
  std::array<std::uint32_t, NPatterns + 1> pattern_at{};
  std::size_t pattern_count = 0;
  std::size_t error_size = 0;  // > 0: planning failed (the text is reported as a compile error)
  std::size_t decided = 0;     // layers the rules ran on (one per group)

  static constexpr std::size_t size() { return Model::size(); }
  constexpr layer_plan operator[](std::size_t i) const { return unpack(codes[i]); }
  /// The decision for the layer called `name` (a compile error when there is none).
  constexpr layer_plan operator[](std::string_view name) const {
    const auto i = model->find(name);
    if (i < 0) {
      if (std::is_constant_evaluated()) detail::no_layer_with_this_name_in_the_model(name);
      throw std::out_of_range("no layer named " + text::py_repr(name) + " in the model");
    }
    return unpack(codes[static_cast<std::size_t>(i)]);
  }
  constexpr std::size_t count(method m) const {
    std::size_t n = 0;
    for (const auto c : codes) n += method_of(c) == m;
    return n;
  }
  constexpr std::string_view pattern(std::size_t k) const {
    return {pattern_text.data() + pattern_at[k], pattern_at[k + 1] - pattern_at[k]};
  }
  constexpr std::string_view pattern_of(const layer_plan& l) const {
    if (l.pattern < 0) return {};
    return pattern(static_cast<std::size_t>(l.pattern));
  }
  std::string name(std::size_t i) const { return model->name_of(i); }

  // A byte per field (the activation kind and the rule a nibble each; an optional is 0 or its value
  // + 1), the pattern index plus one in the top 16 bits. A stored decision never has an error: planning stops at the first.
  static constexpr std::uint64_t pack(const layer_plan& l) {
    const auto byte = [](auto e) { return static_cast<std::uint64_t>(static_cast<std::uint8_t>(e)); };
    return byte(l.decided) | (l.weight ? byte(*l.weight) + 1 : 0) << 8 | byte(l.activation_key) << 16 |
           byte(l.activation) << 24 | byte(l.source) << 28 | (l.target ? byte(*l.target) + 1 : 0) << 32 |
           byte(l.hadamard) << 40 | static_cast<std::uint64_t>(l.pattern + 1) << 48;
  }
  static constexpr method method_of(std::uint64_t c) { return static_cast<method>(c & 0xFF); }
  static constexpr layer_plan unpack(std::uint64_t c) {
    const auto byte = [c](int at) { return static_cast<std::uint8_t>(c >> at); };
    layer_plan l;
    l.decided = method_of(c);
    if (byte(8)) l.weight = static_cast<key_id>(byte(8) - 1);
    l.activation_key = static_cast<key_id>(byte(16));
    l.activation = static_cast<activation_kind>(byte(24) & 0xF);
    l.source = static_cast<decided_by>(byte(28) & 0xF);
    if (byte(32)) l.target = static_cast<shorthand>(byte(32) - 1);
    l.hadamard = byte(40);
    l.pattern = static_cast<std::int32_t>(c >> 48) - 1;
    return l;
  }
};

namespace detail {

/// A record's name split at "{i}": whether its layers can be grouped, and the distinct texts before
/// the index that its name and its shards' names have (where the DFA walk of each index starts).
struct record_split {
  bool groupable = false;
  lean_vector<std::string> prefixes;  // [0] the layer's own; then a shard's, where renaming changes it
};

/// A DFA state some record's prefix (or a shard's) reaches: where each layer index's digits start.
struct probe {
  std::uint8_t matcher = 0;
  std::int32_t state = 0;
};

constexpr bool has_digit(std::string_view s) {
  for (char c : s)
    if (c >= '0' && c <= '9') return true;
  return false;
}

constexpr record_split split_record(const model_desc& packed, const layer_def& d) {
  record_split r;
  const auto at = d.index_at();
  if (at == std::string_view::npos) return r;
  const auto prefix = d.name.substr(0, at), suffix = d.name.substr(at + 3);
  // The grouping is exact when i's digits cannot take part in a shard rename and the DFA can walk the
  // fixed parts; otherwise every layer of the record is decided on its own.
  if (suffix.find('.') == std::string_view::npos || !match::dfa_pattern_set::walkable(prefix) ||
      !match::dfa_pattern_set::walkable(suffix))
    return r;
  r.prefixes.emplace_back(prefix);
  if (const auto* p = packed.fused_entry(suffix)) {
    if (has_digit(p->fused)) return r;
    // A shard's name renames the fused name wherever it occurs: in the prefix too, rarely.
    const bool in_prefix = prefix.find(p->fused) != std::string_view::npos;
    for (const auto& s : p->shards) {
      if (has_digit(s)) return r;
      if (in_prefix) r.prefixes.push_back(text::replace_all(prefix, p->fused, s));
    }
  }
  r.groupable = true;
  return r;
}

/// Plans `m` under `Policy`; on failure returns the message in `error` (plan.error_size set).
template <class Policy, class Model>
constexpr auto run_static_plan(const Model& m, std::string& error) {
  using budget = pattern_budget<typename policy_of<Policy>::type>;
  static_plan<Model, budget::count, budget::chars> out;
  out.model = &m;
  auto fail = [&](const std::string& message) {
    error = message;
    out.error_size = message.size() + 1;
    return out;
  };
  if (auto e = validate(m); !e.empty()) return fail(e);
  auto lowered = lower<Policy>();
  if (lowered.error) return fail(lowered.error->text());
  model_desc packed{std::string(m.name), {}, {}};
  packed.packed.resize(m.packed.size());  // filled in place: nvcc loses copied short strings here
  for (std::size_t k = 0; k < m.packed.size(); ++k) {
    packed.packed[k].fused = m.packed[k].fused;
    for (std::size_t s = 0; s < m.packed[k].count; ++s) packed.packed[k].shards.emplace_back(m.packed[k].shards[s]);
  }
  plan_session<match::dfa_pattern_set> session(*lowered.value, packed);
  if (auto e = session.start()) return fail(e->text());
  out.configured = session.out.configured;
  out.release = session.out.release;
  std::size_t chars = 0;
  for (const auto& p : session.out.patterns) {  // lowering keeps every pattern of the type, at most
    out.pattern_at[out.pattern_count++] = static_cast<std::uint32_t>(chars);
    for (char c : p) out.pattern_text[chars++] = c;
  }
  out.pattern_at[out.pattern_count] = static_cast<std::uint32_t>(chars);
  if (!out.configured) {  // every layer as the runtime leaves it: no decision
    for (auto& c : out.codes) c = out.pack(layer_plan{});
    return out;
  }

  match::dfa_pattern_set* const matchers[2] = {session.ignore_matcher(), session.targets_matcher()};
  // Every distinct state the records' prefixes reach. For one layer index, the states its digits lead
  // to from all of them form the index's class; layers of one record and one class share a decision.
  // The loop below runs once per layer, so it is written for the evaluator: indices and raw arrays.
  lean_vector<probe> probes;
  lean_vector<record_split> splits;
  // A backtracking pattern's answer is not a function of the DFA state. When none tells one digit
  // from another (match::digit_blind), it depends on a layer's index only through its number of
  // digits, which joins the class; otherwise every layer is decided on its own.
  bool backtracking = false, digit_blind = true;
  for (auto* matcher : matchers)
    if (matcher && matcher->has_backtracking()) {
      backtracking = true;
      digit_blind = digit_blind && matcher->backtracking_digit_blind();
    }
  for (const auto& d : m.defs) {
    splits.push_back(split_record(packed, d));
    if (backtracking && !digit_blind) splits.back().groupable = false;
    if (!splits.back().groupable) continue;
    for (std::uint8_t k = 0; k < 2; ++k) {
      if (!matchers[k]) continue;
      for (const auto& pre : splits.back().prefixes) {
        const probe p{k, matchers[k]->walk(match::dfa_pattern_set::start_state, pre)};
        bool seen = false;
        for (const auto& q : probes) seen |= q.matcher == p.matcher && q.state == p.state;
        if (!seen) probes.push_back(p);
      }
    }
  }
  const std::size_t width = probes.size();
  const std::size_t columns = width + 1;          // the states, then the index's digit count (or 0)
  lean_vector<std::int32_t> classes;              // columns per class, flat
  buffer<std::int32_t> reached(columns);          // the current index's states and digit count
  buffer<std::int32_t> head_reached(width + 1);   // the states after all its digits but the last
  std::int64_t head_of_reached = -1;              // ... for this index / 10
  // Per record and class: the layer decided for them, plus one (0: none yet). Flat, `stride` classes
  // per record, regrown when a class past the stride appears.
  const std::size_t records = m.defs.size();
  std::size_t stride = 8;
  buffer<std::int32_t> decided_as(records * stride);
  const record_split* split = splits.data();
  const layer_ref* refs = m.layers.data();
  std::uint64_t* codes = out.codes.data();
  const probe* pr = probes.data();
  layer_desc desc;  // the layer being decided, its storage reused
  std::int64_t current_index = -1;
  std::int32_t current_class = -1;
  for (std::size_t i = 0; i < Model::size(); ++i) {
    const std::size_t def = refs[i].def;
    const std::int64_t index = refs[i].index;
    const bool grouped = split[def].groupable;
    if (grouped && index != current_index) {
      // Indices ascend in runs of ten that share all digits but the last: walk those once per run.
      const std::int64_t head = index / 10;
      std::int32_t* h = head_reached.data();
      if (head != head_of_reached) {
        char digits[12]{};
        std::size_t n = 0;
        for (auto v = head; v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
        for (std::size_t p = 0; p < width; ++p) {
          std::int32_t st = pr[p].state;
          for (std::size_t k = n; k > 0; --k) st = matchers[pr[p].matcher]->step(st, digits[k - 1]);
          h[p] = st;
        }
        head_of_reached = head;
      }
      const char last = static_cast<char>('0' + index % 10);
      std::int32_t* r = reached.data();
      for (std::size_t p = 0; p < width; ++p) r[p] = matchers[pr[p].matcher]->step(h[p], last);
      std::int32_t digit_count = 1;
      for (auto v = index; v >= 10; v /= 10) ++digit_count;
      r[width] = backtracking ? digit_count : 0;
      const std::size_t known = classes.size() / columns;
      const std::int32_t* rows = classes.data();
      current_class = -1;
      for (std::size_t c = 0; c < known && current_class < 0; ++c) {
        const std::int32_t* row = rows + c * columns;
        bool same = true;
        for (std::size_t p = 0; p < columns && same; ++p) same = row[p] == r[p];
        if (same) current_class = static_cast<std::int32_t>(c);
      }
      if (current_class < 0) {
        current_class = static_cast<std::int32_t>(known);
        for (std::size_t p = 0; p < columns; ++p) classes.push_back(r[p]);
        if (known == stride) {  // one class more than the table holds: twice the classes per record
          buffer<std::int32_t> wider(records * 2 * stride);
          for (std::size_t d = 0; d < records; ++d)
            for (std::size_t c = 0; c < stride; ++c) wider.data()[d * 2 * stride + c] = decided_as.data()[d * stride + c];
          decided_as = std::move(wider);
          stride *= 2;
        }
      }
      current_index = index;
    }
    if (grouped) {
      std::int32_t& earlier = decided_as.data()[def * stride + static_cast<std::size_t>(current_class)];
      if (earlier > 0) {
        codes[i] = codes[earlier - 1];
        continue;
      }
      earlier = static_cast<std::int32_t>(i) + 1;
    }
    ++out.decided;
    const layer_def& d = m.defs[def];
    m.name_into(desc.name, i);
    desc.class_name.assign(d.class_name);
    desc.kind = d.kind;
    desc.quantizable = d.quantizable;
    const layer_plan decision = session.decide(desc);
    if (decision.failed()) return fail(session.out.errors[static_cast<std::size_t>(decision.error)]);
    codes[i] = out.pack(decision);
  }
  return out;
}

template <class Policy, class Model>
constexpr auto plan_or_error_size(const Model& m) {
  std::string error;
  return run_static_plan<Policy>(m, error);
}

template <class Policy, std::size_t N, class Model>
constexpr compile_time_text<N> plan_error_text(const Model& m) {
  std::string error;
  run_static_plan<Policy>(m, error);
  compile_time_text<N> t;
  for (std::size_t i = 0; i + 1 < N && i < error.size(); ++i) t.text[i] = error[i];
  return t;
}

template <class Policy, const auto& Model>
struct static_plan_holder {
  static constexpr auto value = plan_or_error_size<Policy>(Model);
  static constexpr bool checked() {
    if constexpr (value.error_size > 0) compile_time_error<plan_error_text<Policy, value.error_size>(Model)>();
    return true;
  }
};

}  // namespace detail

/// The compile-time plan of model definition `Model` (a constexpr variable) under `Policy`: a config
/// type, a shorthand tag, or policy<Quantization, Config>.
template <class Policy, const auto& Model>
inline constexpr const auto& plan_for =
    (void(detail::static_plan_holder<Policy, Model>::checked()), detail::static_plan_holder<Policy, Model>::value);

}  // namespace qpolicy
