// The matcher against Python's re/regex and fnmatch behaviours the spec calls out, its error texts,
// and the lazy DFA against the reference NFA.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "qpolicy/match/pattern_set.hpp"

using namespace qpolicy::match;

namespace {
bool m(std::string_view pattern, std::string_view name, glob_mode g = glob_mode::on) {
  const auto r = match_one(pattern, name, g);
  INFO("pattern " << pattern << " name " << name << " error " << (r.error ? r.error->message : ""));
  REQUIRE(!r.error);
  return r.matched;
}
std::string err(std::string_view pattern) {
  const auto r = match_one(pattern, "x", glob_mode::on);
  REQUIRE(r.error);
  return r.error->message;
}
}  // namespace

TEST_CASE("re: patterns match at the start only, like re.match", "[unit][match]") {
  CHECK(m("re:model.layers.1", "model.layers.10.mlp.down_proj"));  // prefix, '.' is any character
  CHECK(m("re:model.layers.1", "model.layers.1.mlp"));
  CHECK_FALSE(m("re:mlp", "model.layers.0.mlp.down_proj"));  // not a search
  CHECK(m("re:.*mlp\\.", "model.layers.0.mlp.down_proj"));
  CHECK(m("re:.*v_proj", "model.layers.0.self_attn.qkv_proj"));  // unanchored end hits the fused name
  CHECK(m("re:.*up_proj", "model.layers.0.mlp.gate_up_proj"));
  CHECK(m("re:", "anything"));  // empty regex matches everything
  CHECK(m("re:", ""));
  CHECK(m("re:.*\\.q_proj$", "a.q_proj"));
  CHECK_FALSE(m("re:.*\\.q_proj$", "a.q_proj.x"));
  CHECK(m("re:a$", "a\n"));          // $ before a final newline
  CHECK_FALSE(m("re:a\\Z", "a\n"));  // \Z only at the very end
  CHECK(m("re:model\\.layers\\.(0|31)\\.", "model.layers.31.mlp"));
  CHECK_FALSE(m("re:model\\.layers\\.(0|31)\\.", "model.layers.3.mlp"));
  CHECK(m("re:(?:a|b)+c", "ababc"));
  CHECK(m("re:(?P<n>x)y", "xy"));
  CHECK(m("re:a{2,3}b", "aaab"));
  CHECK_FALSE(m("re:a{2,3}b", "ab"));
  CHECK(m("re:a{,2}b", "b"));
  CHECK(m("re:a{", "a{"));  // not a repeat: a literal brace, as in `regex`
  CHECK(m("re:x{1,2}?y", "xxy"));
  CHECK(m("re:[\\d]+\\.", "12."));
  CHECK(m("re:\\w+\\s", "ab c"));
  CHECK(m("re:[^a-c]", "d"));
  CHECK_FALSE(m("re:[^a-c]", "b"));
  CHECK(m("re:[]a]", "]"));
  CHECK(m("re:\\bfoo\\b", "foo.bar"));
  CHECK_FALSE(m("re:foo\\B", "foo.bar"));
  CHECK(m("re:\\x41\\u0042\\U00000043", "ABC"));
  CHECK(m("re:.*é", "caf\xc3\xa9"));  // code points, not bytes
}

TEST_CASE("exact names and fnmatch globs", "[unit][match]") {
  CHECK(m("lm_head", "lm_head"));
  CHECK_FALSE(m("lm_head", "lm_head2"));
  CHECK(m("*o_proj", "model.layers.0.self_attn.o_proj"));  // '*' crosses dots
  CHECK(m("*.mlp.experts", "model.layers.3.mlp.experts"));
  CHECK_FALSE(m("model.layers.*.mlp.experts.*", "model.layers.3.mlp.experts"));
  CHECK(m("model.layers.?.mlp", "model.layers.7.mlp"));
  CHECK_FALSE(m("model.layers.?.mlp", "model.layers.17.mlp"));
  CHECK(m("model.layers.[0-5].x", "model.layers.3.x"));
  CHECK_FALSE(m("model.layers.[!0-5].x", "model.layers.3.x"));
  CHECK(m("model.layers.[!0-5].x", "model.layers.7.x"));
  CHECK(m("[!]]", "a"));
  CHECK(m("[]]", "]"));
  CHECK(m("a[", "a["));      // unclosed '[' is literal
  CHECK(m("*[", "x*["));  // "*" then a literal "["
  CHECK(m("a\\b", "a\\b"));  // backslash is literal
  CHECK(m("[z-a]x", "[z-a]x"));  // exact test comes first
  CHECK_FALSE(m("[z-a]x", "ax"));  // empty range never matches
  CHECK(m("*MLP*", "x.MLP.y"));
  CHECK_FALSE(m("*mlp*", "x.MLP.y"));  // case-sensitive
  CHECK(m("a*b", "a\nb"));  // '*' crosses newlines too
  // legacy: globs are plain names
  CHECK_FALSE(m("*o_proj", "model.layers.0.self_attn.o_proj", glob_mode::off));
  CHECK(m("*o_proj", "*o_proj", glob_mode::off));
}

TEST_CASE("bad regexes carry the regex package's messages", "[unit][match]") {
  CHECK(err("re:(") == "missing ) at position 1");
  CHECK(err("re:[a-") == "unterminated character set at position 3");
  CHECK(err("re:*") == "nothing to repeat at position 0");
  CHECK(err("re:a)") == "unbalanced parenthesis at position 1");
  CHECK(err("re:a**") == "multiple repeat at position 2");
  CHECK(err("re:\\q") == "bad escape \\q at position 2");
  CHECK(err("re:a{2}*") == "multiple repeat at position 4");
  CHECK(err("re:a{3,1}") == "min repeat greater than max repeat at position 2");
  CHECK(err("re:[z-a]") == "bad character range at position 4");
  CHECK(err("re:[]") == "unterminated character set at position 2");
  CHECK(err("re:\\") == "bad escape (end of pattern) at position 1");
  CHECK(err("re:\\x4") == "incomplete escape \\x4 at position 2");
  CHECK(err("re:(?:") == "missing ) at position 3");
  CHECK(err("re:(?") == "unknown extension at position 2");
  CHECK(err("re:a|*") == "nothing to repeat at position 2");
  CHECK(err("re:\\12") == "invalid group reference at position 3");
  CHECK(err("re:a{99999999999}") == "repeat count too big at position 2");
}

TEST_CASE("the regex package's language: lookaround, references, flags, atomic groups, conditionals", "[unit][match]") {
  // Lookahead and lookbehind, positive and negative, variable-length lookbehind.
  CHECK(m("re:^(?!.*(?:lm_head|gate)).*", "model.layers.0.mlp.down_proj"));
  CHECK_FALSE(m("re:^(?!.*(?:lm_head|gate)).*", "model.layers.0.mlp.gate_proj"));
  CHECK(m("re:.*(?<=mlp\\.)down_proj", "model.layers.0.mlp.down_proj"));
  CHECK_FALSE(m("re:.*(?<!mlp\\.)down_proj", "model.layers.0.mlp.down_proj"));
  CHECK(m("re:.*(?<=layers\\.\\d+\\.)mlp", "model.layers.17.mlp"));  // variable length
  CHECK(m("re:x(?=a)", "xa"));
  CHECK_FALSE(m("re:x(?=a)", "x"));
  // Backreferences, numbered and named, and conditionals.
  CHECK(m("re:(a|b)\\1", "bb"));
  CHECK_FALSE(m("re:(a|b)\\1", "ab"));
  CHECK(m("re:(?P<p>ab)(?P=p)", "abab"));
  CHECK(m("re:(?<p>x)\\g<p>", "xx"));
  CHECK(m("re:(a)?(?(1)b|c)", "ab"));
  CHECK(m("re:(a)?(?(1)b|c)", "c"));
  CHECK_FALSE(m("re:(a)?(?(1)b|c)", "ac"));
  CHECK(m("re:(?(?=x)xy|z)", "xy"));
  // Inline flags, global and scoped, with simple case folding.
  CHECK(m("re:(?i)MODEL", "model"));
  CHECK(m("re:a(?i)b", "aB"));
  CHECK_FALSE(m("re:a(?i)b", "AB"));
  CHECK(m("re:a(?i:b)c", "aBc"));
  CHECK_FALSE(m("re:a(?i:b)c", "aBC"));
  CHECK(m("re:(?i)k", "\xe2\x84\xaa"));        // KELVIN SIGN folds to k
  CHECK_FALSE(m("re:(?i)ss", "\xc3\x9f"));      // simple folding only: no ß -> ss
  CHECK(m("re:(?s)a.b", "a\nb"));
  CHECK(m("re:(?m)a$", "a\nb"));
  CHECK(m("re:(?x) model \\. layers # comment", "model.layers"));
  CHECK_FALSE(m("re:(?a)\\w", "\xc3\xa9"));
  // Atomic groups and possessive quantifiers.
  CHECK_FALSE(m("re:(?>a+)a", "aaa"));
  CHECK_FALSE(m("re:a++a", "aaa"));
  CHECK(m("re:a+a", "aaa"));
  // Unicode classes and properties on non-ASCII names.
  CHECK(m("re:\\w+x", "\xc3\xa9x"));
  CHECK(m("re:\\p{Lu}\\p{Ll}", "\xc3\x89t"));
  CHECK_FALSE(m("re:\\P{L}", "\xc3\xa9"));
  CHECK(m("re:\\bmlp\\b", "mlp"));
  CHECK(m("re:layers\\.[[:digit:]]+", "layers.1"));  // the package's POSIX class, not Python re's set
  CHECK_FALSE(m("re:[[:digit:]]", ":"));
  CHECK(m("re:[[:alpha:]]", "\xc3\xa9"));
  CHECK(m("re:[:digit:]+", "dig"));  // outside a set: an ordinary set
  CHECK(m("re:[[:foo]+", "[:of"));   // no closing ":]": a literal '['
  CHECK(m("re:[\\w\\W]", "\n"));     // complementary properties: any character, as the package optimises
  CHECK(m("re:[^\\w\\W]", "a"));
}

TEST_CASE("constructs qpolicy does not run are refused, naming them", "[unit][match]") {
  for (const char* p : {"re:(?:ab){e<=1}", "re:a(?R)?", "re:(a)(?1)", "re:(?|(a)|(b))", "re:(*FAIL)",
                        "re:\\N{LATIN SMALL LETTER A}", "re:\\p{Greek}", "re:\\X", "re:(?f)a", "re:(?V1)a",
                        "re:(?w)\\b", "re:(?L)\\w", "re:(?(DEFINE)(a))"}) {
    const auto r = match_one(p, "a", glob_mode::on);
    INFO(p);
    REQUIRE(r.error);
    CHECK(r.error->unsupported);
    CHECK(r.error->message.rfind("unsupported regex syntax at position ", 0) == 0);
  }
  // Found by the million-pair differential run: the package's first-character prefilter rejects 'u'
  // for (?i)[^a\p{^Lu}]|xy, which the class alone matches (regex.match -> None; the class -> 'u').
  for (const char* p : {"re:(?i)[^a\\p{^Lu}\\p{^Lu}]|xy", "re:(?i)[^\\d\\P{Ll}]|Xy", "re:[^a]|(?i)x"}) {
    INFO(p);
    CHECK(err(p).find("the regex package's first-character prefilter reads it differently") != std::string::npos);
  }
  CHECK(m("re:(?i)[^a\\p{^Lu}]", "ux"));        // no prefilter for a lone class: matched as the package does
  CHECK(m("re:(?i)[^\\p{^Lu}]|xy", "ux"));      // one member: optimised to \p{Lu}, no quirk
  CHECK(err("re:\\p{Greek}").find("'Greek'") != std::string::npos);
  CHECK(err("re:a(?R)?").find("position 1") != std::string::npos);
}

TEST_CASE("the package's refusals and its error texts for the new constructs", "[unit][match]") {
  CHECK(err("re:(?P<1>a)") == "bad character in group name at position 5");
  CHECK(err("re:[[:foo:]]") == "unknown property at position 8");
  CHECK(err("re:\\p{Foo}") == "unknown property at position 7");
  CHECK(err("re:\\p{gc=Foo}") == "unknown property value at position 10");
  CHECK(err("re:(a)\\2") == "invalid group reference at position 5");
  CHECK(err("re:(?P=x)") == "unknown group at position 3");
  CHECK(err("re:(?(x)a)") == "unknown group at position 3");
  CHECK(err("re:(?i-i)a") == "bad inline flags: flag turned on and off at position 5");
  CHECK(err("re:(?a)(?u)x") == "ASCII, LOCALE and UNICODE flags are mutually incompatible");
  CHECK(err("re:(a\\1)") == "cannot refer to an open group at position 4");
  CHECK(err("re:\\U00110000") == "bad hex escape \\U00110000 at position 2");
  // A condition's group is checked before the references in its branches; an empty conditional never.
  CHECK(err("re:(?(3)a|(?P=n1))") == "invalid group reference at position 3");
  CHECK(err("re:(?(n2)a|(?P=n1))") == "unknown group at position 3");
  CHECK(err("re:(?(3)a(?(4)b|c)|(?P=n1))") == "invalid group reference at position 3");
  CHECK(err("re:(?P=n1)(?(3)a|b)") == "unknown group at position 3");
  CHECK(err("re:(?(3))(?P=n1)") == "unknown group at position 9");
  // The package adds the line and column on a pattern with a newline.
  CHECK(err("re:a\nb(") == "missing ) at position 4 (line 2, column 3)");
  CHECK(err("re:(?x)a # c\n[") == "unterminated character set at position 11 (line 2, column 2)");
}

TEST_CASE("a catastrophic pattern ends within the step budget with an error naming it", "[unit][match]") {
  const std::string long_name = std::string(40, 'a') + "b";
  // Regular: the DFA answers in linear time, with the package's answer.
  CHECK_FALSE(m("re:(a+)+$", long_name));
  // A backreference makes it a backtracking pattern: past the budget, the error names pattern and name.
  const auto r = match_one("re:(a+)+\\1$", long_name, glob_mode::on);
  REQUIRE(r.error);
  CHECK(r.error->message.find("'re:(a+)+\\\\1$'") != std::string::npos);
  CHECK(r.error->message.find(long_name) != std::string::npos);
  CHECK(r.error->message.find("100000 backtracking steps") != std::string::npos);
  // Without references, failed states are remembered: the same shape with a lookahead stays linear.
  CHECK_FALSE(m("re:(?=a)(a+)+$", long_name));
}

TEST_CASE("the lazy DFA answers exactly like the NFA", "[unit][match]") {
  const std::vector<std::string> patterns{"re:model\\.layers\\.(0|1|2)\\.", "re:.*v_proj", "*o_proj", "lm_head",
                                          "re:.*experts$", "model.layers.[0-3].mlp.*", "re:(", "re:.*\\bmlp\\b",
                                          "re:.*\\.[qkv]_proj$", "*.?.*", "re:(?:ab|a)*c{1,3}", "*[!a-z]"};
  pattern_set fast(compile_patterns(patterns, glob_mode::on));
  dfa_pattern_set plain(compile_patterns(patterns, glob_mode::on));  // the compile-time planner's matcher
  nfa_pattern_set ref(compile_patterns(patterns, glob_mode::on));
  std::mt19937 rng(7);
  const std::string alphabet = "abcmodelayrsxpvqkjtunh_.0123456789";
  std::vector<std::string> names{"model.layers.0.self_attn.qkv_proj", "model.layers.12.mlp.experts", "lm_head", "",
                                 "model.layers.3.mlp.down_proj", "x.mlp.y", "abac", "aac", "Z", "model.layers.1."};
  for (int i = 0; i < 3000; ++i) {
    std::string n;
    const int len = static_cast<int>(rng() % 24);
    for (int k = 0; k < len; ++k) n += alphabet[rng() % alphabet.size()];
    names.push_back(n);
  }
  // Sorted names share long prefixes: the DFA resumes from the previous name's states there.
  auto sorted = names;
  std::sort(sorted.begin(), sorted.end());
  names.insert(names.end(), sorted.begin(), sorted.end());
  for (const auto& n : names) {
    pattern_hits a, b, c;
    fast.match(n, a);
    ref.match(n, b);
    plain.match(n, c);
    INFO(n);
    REQUIRE(a.bits == b.bits);
    REQUIRE(c.bits == b.bits);
  }
  CHECK(fast.dfa_states() > 1);
}

TEST_CASE("pooled pattern sets: reused across plans of one config, exclusive while held", "[unit][match]") {
  const std::vector<std::string> patterns{"re:.*\\.q_proj$", "lm_head", "*.experts", "re:(?!x).*down"};
  const std::vector<std::string> names{"m.layers.0.q_proj", "lm_head", "m.layers.1.mlp.experts", "m.layers.2.down",
                                       "x.down", "m.layers.3.k_proj"};
  auto hits_of = [&](pooled_pattern_set& s) {
    std::vector<qpolicy::lean_vector<std::uint64_t>> all;
    for (const auto& n : names) {
      pattern_hits h;
      s.match(n, h);
      all.push_back(h.bits);
    }
    return all;
  };
  nfa_pattern_set ref(compile_patterns(patterns, glob_mode::on));
  std::vector<qpolicy::lean_vector<std::uint64_t>> expected;
  for (const auto& n : names) {
    pattern_hits h;
    ref.match(n, h);
    expected.push_back(h.bits);
  }
  const auto before = pooled_pattern_set::pooled();
  {
    auto a = pooled_pattern_set::acquire(patterns, glob_mode::on);
    CHECK(hits_of(a) == expected);
    // Held: a second plan of the same config at the same time gets a set of its own.
    auto b = pooled_pattern_set::acquire(patterns, glob_mode::on);
    CHECK(hits_of(b) == expected);
    auto legacy = pooled_pattern_set::acquire(patterns, glob_mode::off);  // another key: globs off
    pattern_hits h;
    legacy.match("m.layers.1.mlp.experts", h);
    CHECK(!h.test(2));
  }
  const auto after = pooled_pattern_set::pooled();
  CHECK(after >= std::min<std::size_t>(before + 2, pooled_pattern_set::pool_capacity));
  CHECK(after <= pooled_pattern_set::pool_capacity);
  // Reacquired: the DFA states the earlier matches built are kept, and the answers are the same.
  auto again = pooled_pattern_set::acquire(patterns, glob_mode::on);
  CHECK(pooled_pattern_set::pooled() == after - 1);
  CHECK(hits_of(again) == expected);
  // The pool keeps at most pool_capacity sets.
  for (int i = 0; i < 20; ++i) pooled_pattern_set::acquire({std::string("p").append(std::to_string(i))}, glob_mode::on);
  CHECK(pooled_pattern_set::pooled() == pooled_pattern_set::pool_capacity);
}

TEST_CASE("backtracking patterns skip names without the literal every match holds", "[unit][match]") {
  auto required = [](const std::string& pattern) {
    const auto compiled = compile_patterns({pattern}, glob_mode::on);
    REQUIRE(compiled.backtracking.size() == 1);
    std::string out;
    for (char32_t c : compiled.backtracking[0].required) qpolicy::text::append_utf8(out, c);
    return out;
  };
  CHECK(required("re:.*layers\\.(?![0-2]\\d\\.)\\d+\\.mlp\\.down_proj") == ".mlp.down_proj");
  // Through groups and atomic groups; a lookaround ends a run (the longer of the two is kept).
  CHECK(required("re:(model)\\.(?=x)(?>layers)\\.") == "layers.");
  CHECK(required("re:(model)\\.(?>layers)\\.(?=x)") == "model.layers.");
  CHECK(required("re:(?i)abc(?=d)") == "");  // folded literals never count
  CHECK(required("re:(a|b)(?=c)xy*") == "x");
  CHECK(required("re:^(?!.*(?:lm_head|gate)).*") == "");
  // Answers stay those of the NFA, with and without the literal in the name.
  const std::vector<std::string> patterns{"re:.*layers\\.(?![0-2]\\d\\.)\\d+\\.mlp\\.down_proj", "re:(\\w+)\\.\\1\\.q"};
  nfa_pattern_set ref(compile_patterns(patterns, glob_mode::on));
  pattern_set fast(compile_patterns(patterns, glob_mode::on));
  for (const std::string name : {"model.layers.35.mlp.down_proj", "model.layers.05.mlp.down_proj", "model.layers.35.mlp.up_proj",
                                 "a.a.q", "a.b.q", "a.a.k"}) {
    pattern_hits want, got;
    ref.match(name, want);
    fast.match(name, got);
    CHECK(want == got);
  }
}
