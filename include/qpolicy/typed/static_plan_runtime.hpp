#pragma once
// A compile-time plan as a runtime plan (with its summary), and their comparison. Apart from
// static_plan.hpp so that a translation unit that only computes a plan does not parse the summary code.
#include "qpolicy/plan/summary.hpp"
#include "qpolicy/typed/static_plan.hpp"

namespace qpolicy {

/// The compile-time plan as a runtime plan (patterns, summary), for printing and comparing.
template <class Model, std::size_t NP, std::size_t NC>
plan to_runtime(const static_plan<Model, NP, NC>& sp) {
  plan p;
  p.configured = sp.configured;
  p.release = sp.release;
  p.layers.reserve(sp.size());
  for (std::size_t i = 0; i < sp.size(); ++i) p.layers.push_back(sp[i]);
  for (std::size_t k = 0; k < sp.pattern_count; ++k) p.patterns.emplace_back(sp.pattern(k));
  if (p.configured) p.summary = summarize(p, to_runtime(*sp.model));
  return p;
}

/// Layer-by-layer equality of a runtime plan and a compile-time plan (decisions, patterns, summary).
template <class Model, std::size_t NP, std::size_t NC>
bool operator==(const plan& runtime, const static_plan<Model, NP, NC>& compiled) {
  return runtime.same_decisions(to_runtime(compiled));
}

}  // namespace qpolicy
