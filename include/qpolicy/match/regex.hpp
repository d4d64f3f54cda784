#pragma once
// Compiles a pattern in the `regex` package's language (V0, as vLLM's `regex.match` reads it; the
// parser is regex_parser.hpp). A regular pattern joins the shared Thompson program that the NFA and
// the lazy DFA run; a pattern with backreferences, lookaround, atomic groups or conditionals becomes a
// backtracking program of its own (backtrack.hpp). Both are constexpr.
#include <string>
#include <string_view>

#include "qpolicy/core/detail/lean_vector.hpp"
#include "qpolicy/core/detail/maybe.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/match/detail/backtrack.hpp"
#include "qpolicy/match/detail/program.hpp"
#include "qpolicy/match/detail/regex_parser.hpp"

namespace qpolicy::match {

/// How a compiled pattern ends: at any point (re:, start-anchored only) or only at the end of the name.
enum class anchoring : std::uint8_t { prefix, whole };

/// A pattern of a list that runs on the backtracker: pattern `owner`'s answer.
struct backtrack_pattern {
  std::uint32_t owner = 0;
  backtrack_program code;
  lean_vector<char32_t> required;  // a literal every match holds (detail::required_literal); may be empty
};

namespace detail {
constexpr regex_error too_large_error() {
  return regex_error{"unsupported regex: the pattern is too large for qpolicy's matcher once its counted "
                     "repetitions are expanded (limit " + text::to_decimal(max_program_size) + " instructions)",
                     true};
}
}  // namespace detail

/// Compiles `pattern` as an alternative of pattern `owner`: into `prog` when it is regular, else into
/// `backtracking` (with a never-matching entry in `prog`, so pattern ids stay aligned). `dotall` makes
/// '.' match '\n' (globs). Returns the error, if any; nothing is added then.
constexpr maybe<regex_error> compile_regex(program& prog, lean_vector<backtrack_pattern>* backtracking,
                                           std::string_view pattern, std::uint32_t owner, anchoring end,
                                           bool dotall = false) {
  auto decoded = text::decode_utf8(pattern);
  if (!decoded.ok()) return regex_error{"pattern is not valid UTF-8", false};
  detail::regex_parser parser(std::move(decoded.code_points), dotall);
  const auto root = parser.parse();
  if (parser.error) return parser.error;
  if (detail::needs_backtracking(parser.nodes)) {
    if (!backtracking || end != anchoring::prefix)
      return regex_error{"internal error: a backtracking pattern where only a regular one is expected", true};
    backtrack_pattern bp;
    bp.owner = owner;
    bp.code.groups = parser.group_count;
    // Failed (pc, position) pairs stay failed unless captures matter (references, conditions) or an
    // unbounded loop can iterate empty (its exit then depends on where the iteration began).
    bool memo = true;
    for (const auto& n : parser.nodes)
      memo = memo && n.kind != detail::node_kind::backref && n.kind != detail::node_kind::cond &&
             !(n.kind == detail::node_kind::repeat && n.max == detail::unbounded &&
               detail::can_be_empty(parser.nodes, n.kids[0]));
    bp.code.memo = memo;
    bp.required = detail::required_literal(parser.nodes, root);
    bp.code.sets = std::move(parser.sets);
    detail::backtrack_compiler bc(bp.code, parser.nodes, parser.final_ascii);
    bc.emit(root);
    bc.finish();
    if (bc.too_large) return detail::too_large_error();
    prog.sets.push_back(char_set{});  // the never-matching stand-in
    prog.insts.push_back({op::set, static_cast<std::uint32_t>(prog.sets.size() - 1), 0});
    prog.owner.push_back(owner);
    backtracking->push_back(std::move(bp));
    return std::nullopt;
  }
  const auto saved_insts = prog.insts.size();
  const auto saved_sets = prog.sets.size();
  const bool saved_word = prog.uses_word_edges;
  const auto set_base = static_cast<std::uint32_t>(prog.sets.size());
  for (auto& s : parser.sets) prog.sets.push_back(std::move(s));
  detail::emitter em(prog, parser.nodes, set_base, owner, parser.final_ascii);
  em.emit(root);
  if (end == anchoring::whole) em.push({op::at_end, 0, 0});
  em.push({op::match, owner, 0});
  if (em.too_large || prog.insts.size() > max_program_size * 4) {
    prog.insts.resize(saved_insts);
    prog.owner.resize(saved_insts);
    prog.sets.resize(saved_sets);
    prog.uses_word_edges = saved_word;
    return detail::too_large_error();
  }
  return std::nullopt;
}

/// The same for callers that only check a pattern (config validation, globs).
constexpr maybe<regex_error> compile_regex(program& prog, std::string_view pattern, std::uint32_t owner, anchoring end,
                                           bool dotall = false) {
  lean_vector<backtrack_pattern> backtracking;
  return compile_regex(prog, &backtracking, pattern, owner, end, dotall);
}

}  // namespace qpolicy::match
