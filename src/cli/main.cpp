// `qpolicy`: the command line of cli.md over the C++ API.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "../../kernels/cuda/quant.hpp"
#include "qpolicy/io/checkpoint.hpp"
#include "qpolicy/io/json_front.hpp"

namespace {

using namespace qpolicy;

constexpr const char* usage_text =
    "usage: qpolicy resolve [--legacy] [-q NAME] [-c JSON|@FILE]\n"
    "       qpolicy plan [--legacy] [-q NAME] [-c JSON|@FILE] --model MODEL.json [--format table|json]\n"
    "                    [--check-shapes] [--tp N]\n"
    "       qpolicy quantize [--legacy] [-q NAME] [-c JSON|@FILE] [--model MODEL.json] -o OUTPUT.safetensors\n"
    "                    [--config-out CONFIG.json] [--device cpu|cuda] [--threads N] INPUT...\n"
    "       qpolicy quantize-tensor --key KEY [--ue8m0] [--scale-layout row|col|col-tma]\n"
    "                    [--device cpu|cuda] [--threads N] INPUT.safetensors -o OUTPUT.safetensors\n"
    "\n"
    "  -q, --quantization NAME        vLLM's quantization argument (online shorthand, 'online', or a\n"
    "                                 checkpoint method such as 'fp8'); absent means None\n"
    "  -c, --quantization-config ARG  vLLM's quantization_config as JSON text or @file.json (files may\n"
    "                                 hold comments and trailing commas); absent means None\n"
    "  --legacy                       the legacy schema (global_scheme, *_scheme_override, ignore)\n"
    "  --model FILE                   the model's layer list (MODEL.json)\n"
    "  --format table|json            plan output (default: table)\n"
    "  --check-shapes, --tp N         check each scheme against the layers' shapes on N ranks\n"
    "\n"
    "exit status: 0 ok, 2 invalid configuration/model, 1 usage or I/O error\n";

using cli::io_error;
using cli::usage_error;

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw io_error(std::string("cannot read ") + what + " '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw io_error(std::string("error while reading ") + what + " '" + path + "'");
  return s.str();
}

struct options {
  std::string command;
  config_request request;
  maybe<std::string> model_path;
  std::string format = "table";
  plan_options plan;
  std::vector<std::string> rest;  // the arguments of commands that parse their own
  // quantize
  std::vector<std::string> inputs;
  std::string output, config_out;
  device_kind device = device_kind::cpu;
  unsigned threads = 0;
};

options parse_args(int argc, char** argv) {
  options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) throw usage_error("missing command (resolve or plan)");
  o.command = args[0];
  if (o.command == "-h" || o.command == "--help") return o;
  if (o.command == "quantize-tensor") {
    o.rest.assign(args.begin() + 1, args.end());
    return o;
  }
  if (o.command != "resolve" && o.command != "plan" && o.command != "quantize")
    throw usage_error("unknown command '" + o.command + "'; expected resolve, plan, quantize or quantize-tensor");
  for (std::size_t i = 1; i < args.size(); ++i) {
    const auto& a = args[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= args.size()) throw usage_error(std::string(name) + " needs a value");
      return args[++i];
    };
    if (a == "--legacy") o.request.legacy = true;
    else if (a == "-q" || a == "--quantization") o.request.quantization = value("-q");
    else if (a.rfind("--quantization=", 0) == 0) o.request.quantization = a.substr(15);
    else if (a == "-c" || a == "--quantization-config") {
      const auto v = value("-c");
      if (!v.empty() && v[0] == '@') {
        o.request.config_text = read_file(v.substr(1), "quantization_config file");
        o.request.dialect = json_dialect::relaxed;
      } else {
        o.request.config_text = v;
        o.request.dialect = json_dialect::strict;
      }
    } else if (a == "--model" && (o.command == "plan" || o.command == "quantize")) o.model_path = value("--model");
    else if ((a == "-o" || a == "--output") && o.command == "quantize") o.output = value("-o");
    else if (a == "--config-out" && o.command == "quantize") o.config_out = value("--config-out");
    else if (a == "--device" && o.command == "quantize") {
      const auto v = value("--device");
      if (v != "cpu" && v != "cuda") throw usage_error("--device must be cpu or cuda, got '" + v + "'");
      o.device = v == "cpu" ? device_kind::cpu : device_kind::cuda;
    } else if (a == "--threads" && o.command == "quantize") {
      const auto v = value("--threads");
      std::size_t used = 0;
      long n = 0;
      try { n = std::stol(v, &used); } catch (...) { used = 0; }
      if (used != v.size() || n < 1 || n > 4096) throw usage_error("--threads must be an integer from 1 to 4096, got '" + v + "'");
      o.threads = static_cast<unsigned>(n);
    } else if (o.command == "quantize" && !a.empty() && a[0] != '-') o.inputs.push_back(a);
    else if (a == "--format" && o.command == "plan") {
      o.format = value("--format");
      if (o.format != "table" && o.format != "json") throw usage_error("--format must be table or json, got '" + o.format + "'");
    } else if (a == "--check-shapes" && o.command == "plan") o.plan.check_shapes = true;
    else if (a == "--tp" && o.command == "plan") {
      const auto v = value("--tp");
      std::size_t used = 0;
      int tp = 0;
      try { tp = std::stoi(v, &used); } catch (...) { used = 0; }
      if (used != v.size() || tp < 1) throw usage_error("--tp must be a positive integer, got '" + v + "'");
      o.plan.tp = tp;
    } else if (a == "-h" || a == "--help") { o.command = "--help"; return o; }
    else throw usage_error("unknown option '" + a + "' for " + o.command);
  }
  if (o.command == "plan" && !o.model_path) throw usage_error("plan needs --model MODEL.json");
  if (o.command == "quantize" && o.output.empty()) throw usage_error("quantize needs -o OUTPUT.safetensors");
  if (o.command == "quantize" && o.inputs.empty()) throw usage_error("quantize needs an INPUT (.safetensors files or a .index.json)");
  return o;
}

void print_warnings(const std::vector<std::string>& warnings) {
  for (const auto& w : warnings) std::cerr << "warning: " << w << "\n";
}

int run(const options& o) {
  if (o.command == "--help") {
    std::cout << usage_text;
    return 0;
  }
  if (o.command == "quantize-tensor") return cli::quantize_tensor(o.rest);
  // Read the model first so that an unreadable file is an I/O error, not masked by the config.
  std::optional<model_desc> model;
  std::string model_text;
  if (o.model_path) model_text = read_file(*o.model_path, "model file");
  const auto resolved = resolve(o.request);
  if (o.command == "resolve") {
    print_warnings(resolved.warnings);
    std::cout << resolved_to_json(resolved.config) << "\n";
    return 0;
  }
  if (o.command == "quantize") {
    checkpoint_request req;
    req.inputs = o.inputs;
    req.output = o.output;
    req.config_out = o.config_out;
    req.config = resolved.config;
    if (o.model_path) req.model = parse_model(model_text, json_dialect::relaxed);
    req.device = o.device;
    req.threads = o.threads;
    if (isatty(2))
      req.progress = [](std::size_t done, std::size_t total) {
        const int width = 40, filled = static_cast<int>(width * done / (total ? total : 1));
        std::fprintf(stderr, "\r[%s%s] %zu/%zu tensors", std::string(static_cast<std::size_t>(filled), '=').c_str(),
                     std::string(static_cast<std::size_t>(width - filled), ' ').c_str(), done, total);
        if (done == total) std::fprintf(stderr, "\n");
      };
    print_warnings(resolved.warnings);
    const auto s = quantize_checkpoint(req);
    print_warnings(s.warnings);
    std::cerr << s.convention << "\n";
    if (!s.unmatched.empty()) {
      std::cerr << "note: " << s.unmatched.size() << " tensors belong to no layer of the model and were copied:";
      for (std::size_t i = 0; i < s.unmatched.size() && i < 5; ++i) std::cerr << " " << s.unmatched[i];
      if (s.unmatched.size() > 5) std::cerr << " (and " << s.unmatched.size() - 5 << " more)";
      std::cerr << "\n";
    }
    std::fprintf(stderr, "quantized %zu of %zu tensors (%zu copied): %.3f GB in, %.3f GB out, %.2f s, %.2f GB/s\n",
                 s.quantized, s.tensors, s.copied, s.bytes_in / 1e9, s.bytes_out / 1e9, s.seconds,
                 s.seconds > 0 ? s.bytes_in / 1e9 / s.seconds : 0.0);
    return 0;
  }
  model = parse_model(model_text, json_dialect::relaxed);
  const auto p = make_plan(resolved.config, *model, o.plan);
  if (o.format == "json") std::cout << plan_to_json(p, *model, resolved.warnings) << "\n";
  else std::cout << plan_to_table(p, *model, resolved.warnings);
  std::cout.flush();
  if (const auto* e = p.first_error()) {
    std::size_t n = 0;
    for (const auto& l : p.layers) n += l.failed();
    std::cerr << "error: " << *e << "\n";
    if (n > 1) std::cerr << "(" << n << " layers have errors; every one is in the plan output)\n";
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const config_errors& e) {
    for (const auto& d : e.all()) std::cerr << "error: " << d.text() << "\n";
    return 2;
  } catch (const config_error& e) {
    std::cerr << "error: " << e.diag().text() << "\n";
    return 2;
  } catch (const usage_error& e) {
    std::cerr << "error: " << e.what() << "\n\n" << usage_text;
    return 1;
  } catch (const io_error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const cuda::cuda_error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: internal error: " << e.what() << "\n";
    return 1;
  }
}
