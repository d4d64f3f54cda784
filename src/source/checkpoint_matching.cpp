// How vLLM's checkpoint methods match module names (checkpoint_matching.hpp): compressed-tensors'
// patterns and targets, quant_utils' skipped layers, each fused layer through its shards.
#include "checkpoint_matching.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

#include "qpolicy/config/config.hpp"
#include "qpolicy/core/detail/text.hpp"
#include "qpolicy/match/pattern.hpp"

namespace qpolicy::source::detail {

/// compressed-tensors' is_equal_or_regex_match: "re:" patterns by re.match, else equality, or (for
/// class names) case-insensitive containment.
bool equal_or_regex(std::string_view value, std::string_view target, bool contains) {
  if (match::is_regex_pattern(target)) {
    const auto r = match::match_one(target, value, match::glob_mode::off);
    if (r.error) throw config_error("", "the checkpoint's pattern " + text::py_repr(target) + " is not a valid regex: " + r.error->message);
    return r.matched;
  }
  if (!contains) return target == value;
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  return lower(value).find(lower(target)) != std::string::npos;
}

/// The shard names of a fused layer (Python's str.replace of the last component), or none.
std::vector<std::string> shard_names(const model_desc& model, const std::string& name) {
  std::vector<std::string> out;
  const auto dot = name.rfind('.');
  const auto last = dot == std::string::npos ? name : name.substr(dot + 1);
  for (const auto& p : model.packed)
    if (p.fused == last)
      for (const auto& s : p.shards) out.push_back(text::replace_all(name, last, s));
  return out;
}

/// quant_utils.py is_layer_skipped, exact mode: a fused layer's own name, else its shards (which must
/// agree); a name with "experts" by containment in an ignored name that has "experts"; else the name.
/// `which` receives the entry that skipped it.
bool is_layer_skipped(const model_desc& model, const std::string& prefix, const std::vector<std::string>& ignored, std::string& which) {
  auto exact = [&](const std::string& name) {
    const auto it = std::find(ignored.begin(), ignored.end(), name);
    if (it != ignored.end()) which = *it;
    return it != ignored.end();
  };
  const auto shards = shard_names(model, prefix);
  if (!shards.empty()) {
    if (exact(prefix)) return true;
    std::optional<bool> skipped;
    for (const auto& s : shards) {
      const bool this_one = exact(s);
      if (skipped && *skipped != this_one)
        throw config_error("", "Detected some but not all shards of " + prefix +
                                   " are quantized. All shards of fused layers to have the same precision.");
      skipped = this_one;
    }
    return *skipped;
  }
  if (prefix.find("experts") != std::string::npos) {
    for (const auto& l : ignored)
      if (l.find("experts") != std::string::npos && l.find(prefix) != std::string::npos) {
        which = l;
        return true;
      }
    return false;
  }
  return exact(prefix);
}

/// compressed-tensors' should_ignore_layer: patterns matching the name itself, else every shard of a
/// fused layer (all or none).
bool should_ignore(const model_desc& model, const std::string& name, const std::vector<std::string>& ignore, std::string& which) {
  for (const auto& p : ignore)
    if (equal_or_regex(name, p, false)) {
      which = p;
      return true;
    }
  const auto shards = shard_names(model, name);
  if (shards.empty()) return false;
  std::size_t ignored = 0;
  for (const auto& s : shards)
    for (const auto& p : ignore)
      if (equal_or_regex(s, p, false)) {
        which = p;
        ++ignored;
        break;
      }
  if (ignored != 0 && ignored != shards.size())
    throw config_error("", "Found different quantization schemes for the shards of " + name + ". vLLM requires all to use the same scheme.");
  return ignored == shards.size();
}

bool fnmatch_case(std::string_view pattern, std::string_view name) {
  // match_one reads a leading "re:" as a regex; to fnmatch it is three literal characters.
  if (match::is_regex_pattern(pattern)) {
    if (!match::is_regex_pattern(name)) return false;
    pattern.remove_prefix(3), name.remove_prefix(3);
  }
  return match::match_one(pattern, name, match::glob_mode::on).matched;
}

/// compressed-tensors' find_matched_target over the groups' targets (later groups replace a target's
/// group, as the config's dict does): the name, then every shard of a fused layer, then the class name.
const config_group* matched_group(const checkpoint_source& s, const model_desc& model, const std::string& name,
                                  std::string_view class_name, bool moe, std::string& which) {
  // target -> group, in first-insertion order (a dict keeps a replaced key's place).
  std::vector<std::pair<std::string, const config_group*>> map;
  for (const auto& g : s.groups)
    for (const auto& t : g.targets) {
      auto it = std::find_if(map.begin(), map.end(), [&](const auto& e) { return e.first == t; });
      if (it == map.end()) map.emplace_back(t, &g);
      else it->second = &g;
    }
  // get_moe_method adds "RoutedExperts" with Linear's scheme, so that "Linear" targets the experts.
  if (moe) {
    const auto linear = std::find_if(map.begin(), map.end(), [](const auto& e) { return e.first == "Linear"; });
    const bool routed = std::any_of(map.begin(), map.end(), [](const auto& e) { return e.first == "RoutedExperts"; });
    if (linear != map.end() && !routed) map.emplace_back("RoutedExperts", linear->second);
  }
  for (const auto& [t, g] : map)
    if (equal_or_regex(name, t, false)) return which = t, g;
  const auto shards = shard_names(model, name);
  if (!shards.empty()) {
    const config_group* first = nullptr;
    std::string first_target;
    bool all = true;
    for (const auto& sh : shards) {
      const auto it = std::find_if(map.begin(), map.end(), [&](const auto& e) { return equal_or_regex(sh, e.first, false); });
      if (it == map.end()) {
        all = false;
        break;
      }
      if (!first) first = it->second, first_target = it->first;
    }
    if (all && first) return which = first_target, first;
  }
  for (const auto& [t, g] : map)
    if (equal_or_regex(class_name, t, true)) return which = t, g;
  return nullptr;
}

}  // namespace qpolicy::source::detail
