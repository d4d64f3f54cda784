#pragma once
// The parsed form of a regex (a small tree of nodes) and its Thompson construction into a program,
// counted repetitions expanded up to max_program_size.
#include <cstdint>
#include <vector>

#include "qpolicy/match/program.hpp"

namespace qpolicy::match::detail {

enum class node_kind : std::uint8_t { empty, set, literal, any, assertion, concat, alt, repeat };

struct node {
  node_kind kind = node_kind::empty;
  op assertion = op::at_begin;      // for assertion
  std::uint32_t set = 0;            // for set: its index; for literal: the code point
  std::uint32_t min = 0, max = 0;   // for repeat; max == unbounded for '*'/'+'
  std::vector<std::uint32_t> kids;  // concat/alt children, repeat child
};

inline constexpr std::uint32_t unbounded = 0xFFFFFFFFu;

// Thompson construction with counted repetitions expanded.
class emitter {
 public:
  constexpr emitter(program& prog, const std::vector<node>& nodes, std::uint32_t set_base, std::uint32_t owner, bool dotall)
      : prog_(prog), nodes_(nodes), set_base_(set_base), owner_(owner), dotall_(dotall) {}

  bool too_large = false;

  constexpr void emit(std::uint32_t id) {
    if (too_large) return;
    if (prog_.insts.size() > max_program_size) { too_large = true; return; }
    const node& n = nodes_[id];
    switch (n.kind) {
      case node_kind::empty: return;
      case node_kind::set: push({op::set, set_base_ + n.set, 0}); return;
      case node_kind::literal: push({op::literal, n.set, 0}); return;
      case node_kind::any: push({dotall_ ? op::any : op::any_but_nl, 0, 0}); return;
      case node_kind::assertion: push({n.assertion, 0, 0}); return;
      case node_kind::concat:
        for (auto k : n.kids) emit(k);
        return;
      case node_kind::alt: {
        std::vector<std::size_t> exits;
        for (std::size_t k = 0; k < n.kids.size(); ++k) {
          if (k + 1 < n.kids.size()) {
            const auto split = push({op::split, 0, 0});
            prog_.insts[split].a = static_cast<std::uint32_t>(split + 1);
            emit(n.kids[k]);
            exits.push_back(push({op::jmp, 0, 0}));
            prog_.insts[split].b = here();
          } else {
            emit(n.kids[k]);
          }
          if (too_large) return;
        }
        for (auto e : exits) prog_.insts[e].a = here();
        return;
      }
      case node_kind::repeat: {
        for (std::uint32_t k = 0; k < n.min && !too_large; ++k) emit(n.kids[0]);
        if (n.max == unbounded) {
          const auto split = push({op::split, 0, 0});
          prog_.insts[split].a = static_cast<std::uint32_t>(split + 1);
          emit(n.kids[0]);
          push({op::jmp, static_cast<std::uint32_t>(split), 0});
          prog_.insts[split].b = here();
        } else {
          std::vector<std::size_t> splits;
          for (std::uint32_t k = n.min; k < n.max && !too_large; ++k) {
            const auto split = push({op::split, 0, 0});
            prog_.insts[split].a = static_cast<std::uint32_t>(split + 1);
            splits.push_back(split);
            emit(n.kids[0]);
          }
          for (auto s : splits) prog_.insts[s].b = here();
        }
        return;
      }
    }
  }

  constexpr std::size_t push(inst i) {
    prog_.insts.push_back(i);
    prog_.owner.push_back(owner_);
    return prog_.insts.size() - 1;
  }
  constexpr std::uint32_t here() const { return static_cast<std::uint32_t>(prog_.insts.size()); }

 private:
  program& prog_;
  const std::vector<node>& nodes_;
  std::uint32_t set_base_;
  std::uint32_t owner_;
  bool dotall_;
};

}  // namespace qpolicy::match::detail
