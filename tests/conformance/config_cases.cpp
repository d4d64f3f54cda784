// The config conformance cases through the C++ API and through the CLI: every case of
// shared/conformance/vllm_release_cases.json, under the release it names, and the legacy-schema cases of
// config_cases.json (its current-schema cases are superseded by the release cases).
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <algorithm>

#include "../support/process.hpp"
#include "../support/test_inputs.hpp"
#include "qpolicy/io/json_front.hpp"

namespace bj = boost::json;
using namespace qpolicy;

namespace {

using test::required_env;

const std::vector<const bj::object*>& cases() {
  static const auto all = [] {
    std::vector<const bj::object*> out;
    for (const auto& c : test::conformance_cases("QPOLICY_RELEASE_CASES")) out.push_back(&c.as_object());
    for (const auto& c : test::conformance_cases("QPOLICY_CONFIG_CASES"))
      if (c.at("schema").as_string() == "legacy") out.push_back(&c.as_object());
    return out;
  }();
  return all;
}

/// The release a case names (the newest when it names none).
vllm_release release_of(const bj::object& c) {
  const auto* v = c.if_contains("vllm");
  if (!v) return newest_release;
  const auto r = find_release(std::string_view(v->as_string()));
  REQUIRE(r.has_value());
  return *r;
}

std::string str(const bj::value& v) { return v.is_string() ? std::string(v.as_string()) : bj::serialize(v); }

// A Python set prints in hash order: compare the members of each {...} group as a sorted list.
std::string normalize_sets(const std::string& msg) {
  std::string out;
  std::size_t i = 0;
  while (i < msg.size()) {
    const auto open = msg.find('{', i);
    if (open == std::string::npos) break;
    const auto close = msg.find('}', open);
    if (close == std::string::npos) break;
    out += msg.substr(i, open - i);
    std::vector<std::string> parts;
    std::string inner = msg.substr(open + 1, close - open - 1);
    std::size_t s = 0;
    while (true) {
      auto c = inner.find("', '", s);
      if (c == std::string::npos) { parts.push_back(inner.substr(s)); break; }
      parts.push_back(inner.substr(s, c + 1 - s));
      s = c + 3;
    }
    std::sort(parts.begin(), parts.end());
    out += "{";
    for (std::size_t k = 0; k < parts.size(); ++k) out += (k ? ", " : "") + parts[k];
    out += "}";
    i = close + 1;
  }
  return out + msg.substr(i);
}

bool flag(const bj::object& o) {
  const auto* u = o.if_contains("message_order_unstable");
  return u && u->is_bool() && u->as_bool();
}
// The flag may sit on the case or on its expectation.
bool unstable(const bj::object& c) {
  return flag(c) || (c.contains("expect") && flag(c.at("expect").as_object()));
}

void check_message(const std::string& got, const std::string& want, bool order_unstable) {
  if (order_unstable) CHECK(normalize_sets(got) == normalize_sets(want));
  else CHECK(got == want);
}

std::string expected_error_line(const bj::object& expect) {
  const auto& loc = expect.at("error_loc");
  const auto msg = std::string(expect.at("error_message").as_string());
  return loc.is_null() ? msg : std::string(loc.as_string()) + ": " + msg;
}

config_request request_of(const bj::object& c) {
  config_request r;
  r.legacy = c.at("schema").as_string() == "legacy";
  if (!r.legacy) r.release = release_of(c);
  if (const auto* q = c.if_contains("quantization"); q && !q->is_null()) r.quantization = std::string(q->as_string());
  if (const auto* cfg = c.if_contains("config")) r.config_text = bj::serialize(*cfg);
  return r;
}

// Compares a plan's JSON (as the CLI prints it) with the expectation, field by listed field.
void check_plan_json(const bj::object& c, const bj::value& got) {
  const auto& expect = c.at("expect").as_object().at("stdout_json").as_object();
  const auto& want_layers = expect.at("layers").as_array();
  const auto& got_layers = got.at("layers").as_array();
  REQUIRE(got_layers.size() == want_layers.size());
  for (std::size_t i = 0; i < want_layers.size(); ++i) {
    const auto& w = want_layers[i].as_object();
    const auto& g = got_layers[i].as_object();
    for (const auto& kv : w) {
      if (kv.key() == "message_order_unstable") continue;
      INFO("layer " << i << " (" << str(w.at("name")) << ") field " << std::string(kv.key()));
      const auto* gv = g.if_contains(kv.key());
      REQUIRE(gv != nullptr);
      if (kv.key() == "error") check_message(str(*gv), str(kv.value()), flag(w) || unstable(c));
      else CHECK(bj::serialize(*gv) == bj::serialize(kv.value()));
    }
  }
  if (const auto* s = expect.if_contains("summary")) CHECK(bj::serialize(got.at("summary")) == bj::serialize(*s));
}

std::string write_temp_model(const bj::value& model) {
  char path[] = "/tmp/qpolicy-model-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const auto text = bj::serialize(model);
  REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}

}  // namespace

TEST_CASE("conformance cases through the C++ API", "[conformance][api]") {
  REQUIRE(cases().size() >= 599 + 63);
  for (const auto* cp : cases()) {
    const auto& c = *cp;
    const auto& expect = c.at("expect").as_object();
    const int want_exit = static_cast<int>(expect.at("exit").to_number<int>());
    SECTION(std::string(c.at("id").as_string())) {
      const bool is_plan = c.at("command").as_string() == "plan";
      std::optional<resolution> res;
      try {
        res = resolve(request_of(c));
      } catch (const config_error& e) {
        INFO("resolve failed: " << e.diag().text());
        REQUIRE(want_exit == 2);
        REQUIRE(!expect.contains("stdout_json"));
        check_message(e.diag().text(), expected_error_line(expect), unstable(c));
        continue;
      }
      if (!is_plan) {
        REQUIRE(want_exit == 0);
        CHECK(resolved_to_json(res->config) == bj::serialize(expect.at("stdout_json")));
        continue;
      }
      const auto model = parse_model(bj::serialize(c.at("model")));
      std::optional<plan> p;
      try {
        p = make_plan(res->config, model);
      } catch (const config_error& e) {
        INFO("plan failed before any layer: " << e.diag().text());
        REQUIRE(want_exit == 2);
        REQUIRE(!expect.contains("stdout_json"));
        check_message(e.diag().text(), expected_error_line(expect), unstable(c));
        continue;
      }
      REQUIRE(expect.contains("stdout_json"));
      const auto* first = p->first_error();
      CHECK((first ? 2 : 0) == want_exit);
      if (first) check_message(*first, expected_error_line(expect), unstable(c));
      // Structured check of the values (not their printing): method, keys, source, pattern.
      const auto& want_layers = expect.at("stdout_json").as_object().at("layers").as_array();
      REQUIRE(p->layers.size() == want_layers.size());
      for (std::size_t i = 0; i < want_layers.size(); ++i) {
        const auto& w = want_layers[i].as_object();
        const auto& l = p->layers[i];
        INFO("layer " << i << " " << model.layers[i].name);
        if (const auto* e = w.if_contains("error")) {
          REQUIRE(l.failed());
          check_message(std::string(p->error_of(l)), str(*e), flag(w) || unstable(c));
          continue;
        }
        REQUIRE(!l.failed());
        if (const auto* m = w.if_contains("method"))
          CHECK((m->is_null() ? std::string("null") : std::string(m->as_string())) == to_string(l.decided));
        if (const auto* k = w.if_contains("weight"))
          CHECK((k->is_null() ? std::string("null") : std::string(k->as_string())) ==
                (l.weight ? key_name(*l.weight, p->release) : "null"));
        if (const auto* a = w.if_contains("activation")) {
          const std::string got = !l.weight || l.activation == activation_kind::none ? "null"
                                  : l.activation == activation_kind::method_default ? "default"
                                                                                   : key_name(l.activation_key, p->release);
          CHECK((a->is_null() ? std::string("null") : std::string(a->as_string())) == got);
        }
        if (const auto* h = w.if_contains("hadamard_size")) CHECK(h->to_number<std::int64_t>() == hadamard_size_of(l));
        if (const auto* s = w.if_contains("source"))
          CHECK((s->is_null() ? std::string("null") : std::string(s->as_string())) == to_string(l.source));
        if (const auto* pat = w.if_contains("pattern"))
          CHECK((pat->is_null() ? std::string("<null>") : std::string(pat->as_string())) ==
                (l.pattern < 0 ? std::string("<null>") : std::string(p->pattern_of(l))));
      }
      if (const auto* s = expect.at("stdout_json").as_object().if_contains("summary")) {
        std::vector<std::string> want;
        for (const auto& line : s->as_array()) want.emplace_back(line.as_string());
        CHECK(p->summary == want);
      }
    }
  }
}

TEST_CASE("conformance cases through the qpolicy CLI", "[conformance][cli]") {
  const auto exe = required_env("QPOLICY_EXE");
  for (const auto* cp : cases()) {
    const auto& c = *cp;
    const auto& expect = c.at("expect").as_object();
    const int want_exit = static_cast<int>(expect.at("exit").to_number<int>());
    SECTION(std::string(c.at("id").as_string())) {
      std::vector<std::string> args{exe, std::string(c.at("command").as_string())};
      if (c.at("schema").as_string() == "legacy") args.push_back("--legacy");
      if (const auto* v = c.if_contains("vllm")) args.insert(args.end(), {"--vllm", std::string(v->as_string())});
      if (const auto* q = c.if_contains("quantization"); q && !q->is_null()) {
        args.push_back("-q");
        args.emplace_back(q->as_string());
      }
      if (const auto* cfg = c.if_contains("config")) {
        args.push_back("-c");
        args.push_back(bj::serialize(*cfg));
      }
      std::string model_path;
      if (c.at("command").as_string() == "plan") {
        model_path = write_temp_model(c.at("model"));
        args.insert(args.end(), {"--model", model_path, "--format", "json"});
      }
      const auto r = test::run_process(args);
      if (!model_path.empty()) std::remove(model_path.c_str());
      INFO("stderr: " << r.err);
      REQUIRE(r.status == want_exit);
      if (want_exit == 2) {
        const auto line = r.err.substr(0, r.err.find('\n'));
        check_message(line, "error: " + expected_error_line(expect), unstable(c));
      }
      if (const auto* sj = expect.if_contains("stdout_json")) {
        const auto got = bj::parse(r.out);
        if (c.at("command").as_string() == "resolve") CHECK(bj::serialize(got) == bj::serialize(*sj));
        else check_plan_json(c, got);
      } else if (want_exit == 2) {
        CHECK(r.out.empty());
      }
    }
  }
}
