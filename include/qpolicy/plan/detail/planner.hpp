#pragma once
// The per-layer decision rules (spec §3.7, §4.2-§4.4, §5), written once as constexpr code over any
// matcher with `match(name, hits)`: the runtime instantiates it with the lazy-DFA pattern_set, the
// compile-time front end with the NFA. Every layer is decided; errors are per layer.
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "qpolicy/config/config.hpp"
#include "qpolicy/core/detail/lean_vector.hpp"
#include "qpolicy/match/pattern.hpp"
#include "qpolicy/model/model.hpp"
#include "qpolicy/plan/plan.hpp"
#include "qpolicy/schemes/contract.hpp"

namespace qpolicy {

namespace detail {

/// Per-pattern bookkeeping for the "matched no layer" warnings.
struct pattern_use {
  bool handled = false;    // hit a layer that online quantization decides
  bool unhandled = false;  // hit only other / non-quantizable layers
};

template <class Matcher>
class planner {
 public:
  constexpr planner(const model_desc& model, plan& out) : model_(model), out_(out) {}

  /// Pattern matching outcome for one name: matched indices (list order) or an error text.
  struct name_hits {
    lean_vector<std::uint32_t> matched;
    maybe<std::string> error;
  };

  // The result lives in hits_ until the next call (no allocation per name).
  constexpr const name_hits& hits_of(Matcher& m, std::string_view name, std::uint32_t base, bool stop_at_first_match) {
    name_hits& r = hits_;
    r.matched.clear();
    r.error.reset();
    m.match(name, scratch_);
    if (!any_error(m)) {  // the common case: walk the set bits only
      for (std::size_t w = 0; w < scratch_.bits.size() && !(stop_at_first_match && !r.matched.empty()); ++w)
        for (std::uint64_t bits = scratch_.bits[w]; bits; bits &= bits - 1) {
          const auto k = static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(bits)));
          r.matched.push_back(k);
          uses_[base + k].handled = true;
          if (stop_at_first_match) break;
        }
    } else {
      for (std::uint32_t k = 0; k < m.size(); ++k) {
        if (m.error(k)) {  // a bad regex raises when tried; legacy stops trying at the first match
          if (!(stop_at_first_match && !r.matched.empty())) r.error = m.error(k)->message;
          if (r.error) return r;
          continue;
        }
        if (scratch_.test(k)) {
          r.matched.push_back(k);
          uses_[base + k].handled = true;
          if (stop_at_first_match) break;
        }
      }
    }
    for (auto u : scratch_.over_budget)
      if (!(stop_at_first_match && !r.matched.empty() && r.matched.front() < u)) {
        r.error = match::budget_error(out_.patterns[base + u], name).message;
        return r;
      }
    return r;
  }

  static constexpr bool any_error(const Matcher& m) { return m.any_error(); }

  /// Records hits of layers the config never consults, for warnings only.
  constexpr void note_unhandled(Matcher& m, std::string_view name, std::uint32_t base) {
    m.match(name, scratch_);
    for (std::uint32_t k = 0; k < m.size(); ++k)
      if (!m.error(k) && scratch_.test(k)) uses_[base + k].unhandled = true;
  }

  /// Calls fn(shard name) for each shard in order (name.replace(proj, shard)); stops when fn returns false.
  /// The occurrences of the fused name are found once for all shards.
  template <class Fn>
  constexpr void for_each_shard(const layer_desc& layer, const packed_mapping& p, Fn&& fn) {
    text::find_all_into(fused_at_, layer.name, p.fused);
    for (const auto& s : p.shards) {
      text::replace_at_into(shard_buf_, layer.name, fused_at_, p.fused.size(), s);
      if (!fn(std::string_view(shard_buf_))) return;
    }
  }

  /// Result of the ignore decision: ignored with its pattern, not ignored, or an error.
  struct ignore_result {
    bool ignored = false;
    std::int32_t pattern = -1;
    maybe<std::string> error;
  };

  // Current schema §4.2: every pattern tried, direct match first, then all shards must agree.
  constexpr ignore_result ignore_current(Matcher& m, const layer_desc& layer) {
    const auto& direct = hits_of(m, layer.name, 0, false);
    if (direct.error) return {false, -1, direct.error};
    if (!direct.matched.empty()) return {true, static_cast<std::int32_t>(direct.matched.front()), std::nullopt};
    const auto* p = model_.fused_entry(layer.name);
    if (!p) return {};
    if (p->shards.empty()) return {false, -1, empty_shards_message(*p)};
    bool any_hit = false, any_miss = false;
    std::int32_t first_pattern = -1;
    maybe<std::string> error;
    for_each_shard(layer, *p, [&](std::string_view shard) {
      const auto& h = hits_of(m, shard, 0, false);
      if (h.error) {
        error = h.error;
        return false;
      }
      if (h.matched.empty()) {
        any_miss = true;
      } else {
        if (first_pattern < 0) first_pattern = static_cast<std::int32_t>(h.matched.front());
        any_hit = true;
      }
      return true;
    });
    if (error) return {false, -1, error};
    if (any_hit && any_miss) {  // one allocation: a model may have this error on every fused layer
      constexpr std::string_view head = "Found different quantization schemes for the shards of ";
      constexpr std::string_view tail = ". vLLM requires all to use the same scheme.";
      std::string message;
      message.reserve(head.size() + layer.name.size() + tail.size());
      message.append(head).append(layer.name).append(tail);
      return {false, -1, std::move(message)};
    }
    return {any_hit, any_hit ? first_pattern : -1, std::nullopt};
  }

  // Legacy §4.4: in order, first match wins; fused path unless the name is literally listed.
  constexpr ignore_result ignore_legacy(Matcher& m, const layer_desc& layer, const std::vector<std::string>& ignore) {
    const auto* p = model_.fused_entry(layer.name);
    bool literally_listed = false;
    for (const auto& pattern : ignore) literally_listed |= pattern == layer.name;
    if (!p || literally_listed) {
      const auto& h = hits_of(m, layer.name, 0, true);
      if (h.error) return {false, -1, h.error};
      if (h.matched.empty()) return {};
      return {true, static_cast<std::int32_t>(h.matched.front()), std::nullopt};
    }
    if (p->shards.empty()) return {false, -1, empty_shards_message(*p)};
    std::optional<bool> skipped;
    std::int32_t pattern = -1;
    maybe<std::string> error;
    for_each_shard(layer, *p, [&](std::string_view shard) {
      const auto& h = hits_of(m, shard, 0, true);
      if (h.error) {
        error = h.error;
        return false;
      }
      const bool hit = !h.matched.empty();
      if (!skipped) {
        skipped = hit;
        if (hit) pattern = static_cast<std::int32_t>(h.matched.front());
      } else if (*skipped != hit) {
        error = "Found a different quantization schemes for " + text::py_repr_list(p->shards) + " in " + layer.name +
                ". vLLM requires all to use the same scheme.";
        return false;
      }
      return true;
    });
    if (error) return {false, -1, error};
    return {*skipped, *skipped ? pattern : -1, std::nullopt};
  }

  /// Result of §4.3: the deciding target index, no match, or an error.
  struct target_result {
    std::int32_t target = -1;
    maybe<std::string> error;
  };

  constexpr target_result match_targets(Matcher& m, const layer_desc& layer, const std::vector<target_rule>& targets,
                                        std::uint32_t base) {
    lean_vector<lean_vector<std::uint32_t>> sets;
    const auto& direct = hits_of(m, layer.name, base, false);
    if (direct.error) return {-1, direct.error};
    const auto* p = model_.fused_entry(layer.name);
    if (!direct.matched.empty() || !p) {
      if (direct.matched.empty()) return {};  // the common case: no target, nothing to collect
      sets.push_back(direct.matched);
    } else {
      if (p->shards.empty()) return {-1, empty_shards_message(*p)};
      maybe<std::string> error;
      for_each_shard(layer, *p, [&](std::string_view shard) {
        const auto& h = hits_of(m, shard, base, false);
        if (h.error) {
          error = h.error;
          return false;
        }
        sets.push_back(h.matched);
        return true;
      });
      if (error) return {-1, error};
    }
    std::size_t empty = 0;
    bool multiple = false;
    for (const auto& s : sets) {
      empty += s.empty();
      multiple |= s.size() > 1;
    }
    auto sets_repr = [&] {
      std::string r = "[";
      for (std::size_t i = 0; i < sets.size(); ++i) {
        if (i) r += ", ";
        std::vector<std::string> names;
        for (auto k : sets[i]) names.push_back(targets[k].pattern);
        r += text::py_repr_set(names);
      }
      return r + "]";
    };
    if (empty == sets.size()) return {};
    if (empty > 0)
      return {-1, "Found unmatched shards for " + layer.name + ": " + sets_repr() +
                      ". vLLM requires all shards of a fused layer to match a target."};
    if (multiple)
      return {-1, "Found multiple quantization_config.targets matches for the shards of " + layer.name + ": " +
                      sets_repr() + ". Each shard may match at most one target."};
    for (const auto& s : sets)
      if (!same_target(targets[s.front()], targets[sets.front().front()], release_)) {
        std::vector<std::string> per_shard;
        for (const auto& t : sets) per_shard.push_back(targets[t.front()].pattern);
        return {-1, "Found different quantization_config.targets values for the shards of " + layer.name + ": " +
                        text::py_repr_list(per_shard) + ". vLLM requires all shards of a fused layer to use the same target."};
      }
    return {static_cast<std::int32_t>(sets.front().front()), std::nullopt};
  }

  // By reference: GCC 12 misreads a moved-from by-value string parameter during constant evaluation.
  constexpr layer_plan fail(const std::string& message) {
    layer_plan l;
    l.error = static_cast<std::int32_t>(out_.errors.size());
    out_.errors.push_back(message);
    return l;
  }
  // A message made for this layer is moved in at run time (copied during constant evaluation, as above).
  constexpr layer_plan fail(maybe<std::string>&& message) {
    if (std::is_constant_evaluated()) return fail(*message);
    layer_plan l;
    l.error = static_cast<std::int32_t>(out_.errors.size());
    out_.errors.push_back(std::move(*message));
    return l;
  }

  /// A spec's decision for a layer (§3.6, §9.2, §9.4): no online method (int4), a dispatch miss, the
  /// release's rotation and activation rules, or the method with its activation and provenance.
  constexpr layer_plan decide_spec(const layer_desc& layer, const quant_spec& spec, decided_by source, std::int32_t pattern,
                                   std::optional<shorthand> target) {
    const key_id weight = *spec.weight;
    if (!entry(weight).online_method) return unquantized(source, pattern);
    const auto m = schemes::dispatch_method(weight, layer.kind, release_);
    if (!m)
      return fail("online quantization for " + layer.class_name + " with weight=" + key_repr(weight) +
                  " is not supported; supported weight keys: " + schemes::supported_weight_keys_repr(layer.kind, release_));
    const auto& row = schemes::online_method_of(*m);
    const std::string_view cls = layer.kind == layer_kind::linear ? row.linear_class : row.moe_class;
    activation_kind act = activation_kind::method_default;
    if (rules(release_).activation_opt_in) {
      if (spec.hadamard_size && !(layer.kind == layer_kind::linear && row.rotates_input))
        return fail("hadamard_size is not yet supported for online " + std::string(cls) + "; supported: " +
                    schemes::rotating_classes_repr());
      if (spec.activation_set) {
        if (!row.accepts_activation_override)
          return fail("activation override is not supported for online " + std::string(cls));
        if (spec.activation && key_of(*spec.activation).scale.is_static)
          return fail("online " + std::string(cls) + " cannot honour activation=" + key_repr(*spec.activation) +
                      ": static activation scales are not supported. Use a dynamic activation key, or 'activation: null'.");
        act = spec.activation ? activation_kind::key : activation_kind::none;
      }
    } else if (spec.activation) {
      return fail("activation override (activation=" + key_repr(*spec.activation) + ") is not yet supported for online " +
                  std::string(cls));
    }
    layer_plan l;
    l.decided = *m;
    l.weight = weight;
    l.activation = act;
    l.activation_key = spec.activation.value_or(key_id::fp8_per_tensor_dynamic);
    l.hadamard = hadamard_code(spec.hadamard_size);
    l.source = source;
    l.pattern = pattern;
    l.target = target;
    return l;
  }

  constexpr layer_plan decide_current(const layer_desc& layer, const current_config& cfg, Matcher& ignore_m,
                                      Matcher& targets_m) {
    const bool consulted = layer.quantizable && (layer.kind != layer_kind::other || cfg.targets);
    if (!consulted) {
      note_unhandled(ignore_m, layer.name, 0);
      if (cfg.targets) note_unhandled(targets_m, layer.name, static_cast<std::uint32_t>(cfg.ignore.size()));
      return {};
    }
    auto ign = ignore_current(ignore_m, layer);
    if (ign.error) return fail(std::move(ign.error));
    if (!cfg.targets) {
      if (ign.ignored) return unquantized(decided_by::ignore, ign.pattern);
      const auto& spec = layer.kind == layer_kind::linear ? cfg.linear : cfg.moe;
      const auto source = layer.kind == layer_kind::linear ? decided_by::linear : decided_by::moe;
      if (!spec || !spec->weight) return unquantized(source, -1);
      return decide_spec(layer, *spec, source, -1, std::nullopt);
    }
    const auto base = static_cast<std::uint32_t>(cfg.ignore.size());
    auto t = match_targets(targets_m, layer, *cfg.targets, base);
    if (t.error) return fail(std::move(t.error));
    const auto& targets = *cfg.targets;
    if (ign.ignored && t.target >= 0)
      return fail("Layer " + layer.name + " matches both quantization_config.ignore and quantization_config.targets (" +
                  text::py_repr_list(std::vector<std::string>{targets[static_cast<std::size_t>(t.target)].pattern}) +
                  "); a layer may not be referenced by both.");
    if (ign.ignored || t.target < 0) {
      if (layer.kind == layer_kind::other) return {};
      return ign.ignored ? unquantized(decided_by::ignore, ign.pattern) : unquantized(decided_by::none, -1);
    }
    const auto& rule = targets[static_cast<std::size_t>(t.target)];
    if (layer.kind == layer_kind::other)
      return fail("Layer " + layer.name + " was matched by quantization_config.targets (" + rule.pattern +
                  "), but online quantization is not supported for " + layer.class_name + ".");
    // A shorthand gives its slot for the layer's kind; a spec (0.34) applies to both kinds.
    const auto spec = rule.value ? shorthand_spec(*rule.value, layer.kind, release_) : std::optional<quant_spec>(rule.spec);
    if (!spec)
      return fail("targets pattern " + rule.pattern + " = " + std::string(to_string(*rule.value)) +
                  " does not define a QuantSpec for " + layer.class_name + " layers (matched at " + layer.name + ").");
    const auto pattern = static_cast<std::int32_t>(base) + t.target;
    if (!spec->weight) return unquantized(decided_by::targets, pattern);
    return decide_spec(layer, *spec, decided_by::targets, pattern, rule.value);
  }

  constexpr layer_plan decide_legacy(const layer_desc& layer, const legacy_config& cfg, Matcher& ignore_m) {
    if (!layer.quantizable || layer.kind == layer_kind::other) {
      note_unhandled(ignore_m, layer.name, 0);
      return {};
    }
    auto ign = ignore_legacy(ignore_m, layer, cfg.ignore);
    if (ign.error) return fail(std::move(ign.error));
    if (ign.ignored) return unquantized(decided_by::ignore, ign.pattern);
    const auto& over = layer.kind == layer_kind::linear ? cfg.linear_scheme_override : cfg.moe_scheme_override;
    const auto scheme = over ? over : cfg.global_scheme;
    const auto source = over ? (layer.kind == layer_kind::linear ? decided_by::linear_scheme_override
                                                                 : decided_by::moe_scheme_override)
                             : decided_by::global;
    // vLLM's quirk (spec §5.2): no scheme at all (only the other kind's override set) means fp8_per_tensor.
    const auto key = entry(scheme.value_or(legacy_scheme::fp8_per_tensor)).weight;
    return decide_spec(layer, quant_spec{key, std::nullopt, true, false}, source, -1, std::nullopt);
  }

  constexpr void warn_unused(std::size_t ignore_count) {
    for (std::size_t k = 0; k < uses_.size(); ++k) {
      if (uses_[k].handled) continue;
      const std::string what = k < ignore_count ? "ignore pattern " : "targets pattern ";
      out_.warnings.push_back(what + text::py_repr(out_.patterns[k]) +
                              (uses_[k].unhandled ? " matched only layers online quantization does not handle"
                                                  : " matched no layer"));
    }
  }

  constexpr void reset_uses(std::size_t n) { uses_.assign(n, {}); }
  constexpr void set_release(vllm_release r) { release_ = r; }

 private:
  const model_desc& model_;
  plan& out_;
  match::pattern_hits scratch_;
  name_hits hits_;
  std::string shard_buf_;
  lean_vector<std::size_t> fused_at_;  // where the fused name occurs in the current layer's name
  lean_vector<pattern_use> uses_;
  vllm_release release_ = newest_release;

  /// Whether two targets values ask for the same thing (shards of one fused layer must): the same
  /// shorthand before 0.34; from 0.34 the same (weight, activation, activation written, rotation) per
  /// layer kind, a one-sided shorthand standing for its spec on either kind.
  static constexpr bool same_target(const target_rule& a, const target_rule& b, vllm_release r) {
    if (!rules(r).spec_targets) return a.value == b.value;
    auto slot = [r](const target_rule& t, layer_kind kind) -> std::optional<quant_spec> {
      if (!t.value) return t.spec;
      const auto other = kind == layer_kind::linear ? layer_kind::moe : layer_kind::linear;
      if (auto s = shorthand_spec(*t.value, kind, r)) return s;
      return shorthand_spec(*t.value, other, r);
    };
    auto same = [](const std::optional<quant_spec>& x, const std::optional<quant_spec>& y) {
      if (!x || !y) return x.has_value() == y.has_value();
      return *x == *y && x->activation_set == y->activation_set;
    };
    return same(slot(a, layer_kind::linear), slot(b, layer_kind::linear)) &&
           same(slot(a, layer_kind::moe), slot(b, layer_kind::moe));
  }

  static constexpr std::string empty_shards_message(const packed_mapping& p) {
    return "packed_modules_mapping[" + text::py_repr(p.fused) + "] lists no shards, so the fused layer cannot be matched";
  }
  static constexpr layer_plan unquantized(decided_by source, std::int32_t pattern) {
    layer_plan l;
    l.decided = method::unquantized;
    l.source = source;
    l.pattern = pattern;
    return l;
  }
};

/// The first pattern in `patterns` that the engine refuses although Python accepts it.
template <class Matcher>
constexpr maybe<diagnostic> unsupported_pattern(const std::vector<std::string>& patterns, const char* field,
                                                const Matcher& m) {
  for (std::size_t k = 0; k < patterns.size(); ++k)
    if (m.error(k) && m.error(k)->unsupported)
      return diagnostic{std::string(field) + "." + text::to_decimal(static_cast<long long>(k)),
                        "pattern " + text::py_repr(patterns[k]) + ": " + m.error(k)->message};
  return std::nullopt;
}

/// A matcher for a pattern list: compiled here, unless the matcher type keeps compiled sets itself
/// (match::pooled_pattern_set, which the runtime reuses across plans of one config).
template <class Matcher>
constexpr Matcher make_matcher(const std::vector<std::string>& patterns, match::glob_mode mode) {
  if constexpr (requires { Matcher::acquire(patterns, mode); }) return Matcher::acquire(patterns, mode);
  else return Matcher(match::compile_patterns(patterns, mode));
}

}  // namespace detail

/// One configuration ready to decide layers: patterns compiled, matchers built, the plan's patterns
/// recorded. build_plan runs it over every layer; the compile-time planner over one layer per group
/// of layers that the matchers cannot tell apart.
template <class Matcher>
class plan_session {
 public:
  plan out;

  /// `model` supplies packed_modules_mapping (and must outlive the session).
  constexpr plan_session(const resolved_config& config, const model_desc& model)
      : config_(config), planner_(model, out) {}
  plan_session(const plan_session&) = delete;
  plan_session& operator=(const plan_session&) = delete;

  /// Errors before any layer: the "at least one" check, a pattern qpolicy cannot run.
  constexpr maybe<diagnostic> start() {
    if (config_.is_none()) {
      out.warnings.push_back("no online quantization is configured (the resolver returned None): every layer keeps "
                             "its checkpoint's or its own precision");
      return std::nullopt;
    }
    if (auto e = check_online_config(config_)) return e;
    out.configured = true;
    if (const auto* cfg = config_.current()) {
      out.release = cfg->release;
      planner_.set_release(cfg->release);
      ignore_.emplace(detail::make_matcher<Matcher>(cfg->ignore, match::glob_mode::on));
      if (auto e = detail::unsupported_pattern(cfg->ignore, "ignore", *ignore_)) return e;
      std::vector<std::string> target_patterns;
      if (cfg->targets)
        for (const auto& t : *cfg->targets) target_patterns.push_back(t.pattern);
      targets_.emplace(detail::make_matcher<Matcher>(target_patterns, match::glob_mode::on));
      if (auto e = detail::unsupported_pattern(target_patterns, "targets", *targets_)) return e;
      out.patterns = cfg->ignore;
      out.patterns.insert(out.patterns.end(), target_patterns.begin(), target_patterns.end());
    } else {
      const auto& legacy = *config_.legacy();
      ignore_.emplace(detail::make_matcher<Matcher>(legacy.ignore, match::glob_mode::off));
      if (auto e = detail::unsupported_pattern(legacy.ignore, "ignore", *ignore_)) return e;
      out.patterns = legacy.ignore;
    }
    planner_.reset_uses(out.patterns.size());
    return std::nullopt;
  }

  /// The decision for one layer (layer errors are recorded in `out.errors`).
  constexpr layer_plan decide(const layer_desc& layer) {
    if (!out.configured) return {};
    if (const auto* cfg = config_.current())
      return planner_.decide_current(layer, *cfg, *ignore_, *targets_);
    return planner_.decide_legacy(layer, *config_.legacy(), *ignore_);
  }

  /// The "matched no layer" warnings, once every layer is decided.
  constexpr void finish() {
    if (!out.configured) return;
    if (const auto* cfg = config_.current()) planner_.warn_unused(cfg->ignore.size());
    else planner_.warn_unused(config_.legacy()->ignore.size());
  }

  /// The matchers of `ignore` and of `targets` (empty when the config has none).
  constexpr Matcher* ignore_matcher() { return ignore_ ? &*ignore_ : nullptr; }
  constexpr Matcher* targets_matcher() { return targets_ ? &*targets_ : nullptr; }

 private:
  const resolved_config& config_;
  detail::planner<Matcher> planner_;
  maybe<Matcher> ignore_, targets_;
};

}  // namespace qpolicy
