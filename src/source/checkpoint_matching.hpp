#pragma once
// Internal to src/source: how vLLM's checkpoint methods match module names against a checkpoint's
// ignore lists and compressed-tensors' targets (checkpoint_matching.cpp), for the layer rules of
// checkpoint_source.cpp.
#include <string>
#include <string_view>
#include <vector>

#include "qpolicy/source/checkpoint_source.hpp"

namespace qpolicy::source::detail {

/// compressed-tensors' is_equal_or_regex_match: "re:" patterns by re.match, else equality, or (for
/// class names) case-insensitive containment. Throws config_error for an invalid regex.
bool equal_or_regex(std::string_view value, std::string_view target, bool contains);
/// The shard names of a fused layer (Python's str.replace of the last component), or none.
std::vector<std::string> shard_names(const model_desc& model, const std::string& name);
/// quant_utils.py is_layer_skipped, exact mode; `which` receives the entry that skipped it.
bool is_layer_skipped(const model_desc& model, const std::string& prefix, const std::vector<std::string>& ignored, std::string& which);
/// compressed-tensors' should_ignore_layer; `which` receives the pattern that matched.
bool should_ignore(const model_desc& model, const std::string& name, const std::vector<std::string>& ignore, std::string& which);
/// Python's fnmatch.fnmatchcase: `*`, `?` and `[...]` globs over the whole name ("re:" is no prefix here).
bool fnmatch_case(std::string_view pattern, std::string_view name);
/// compressed-tensors' find_matched_target over the groups' targets; `which` receives the target.
const config_group* matched_group(const checkpoint_source& s, const model_desc& model, const std::string& name,
                                  std::string_view class_name, bool moe, std::string& which);

}  // namespace qpolicy::source::detail
