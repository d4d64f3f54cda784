// `qpolicy`: the command line of cli.md over the C++ API.
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "kernels/cuda/quant.hpp"
#include "qpolicy/io/checkpoint.hpp"
#include "qpolicy/io/io_error.hpp"
#include "qpolicy/io/paths.hpp"
#include "qpolicy/io/staged_output.hpp"
#include "qpolicy/io/json_front.hpp"

namespace {

using namespace qpolicy;

using cli::usage_error;
using cli::usage_text;

void print_warnings(const std::vector<std::string>& warnings) {
  for (const auto& w : warnings) fmt::print(stderr, "warning: {}\n", text::escape_lone_surrogates(w));
}

int run(const cli::options& o) {
  if (o.command == "help") {
    fmt::print("{}", usage_text);
    return 0;
  }
  if (o.command == "quantize-tensor") return cli::quantize_tensor(o);
  // Read the files first so that an unreadable one is an I/O error, not masked by the config.
  auto request = o.request;
  if (o.config_file) request.config_text = read_input_file(*o.config_file, "the quantization_config file");
  std::optional<model_desc> model;
  std::string model_text;
  if (o.model_path) model_text = read_input_file(*o.model_path, "the model file");
  const auto resolved = resolve(request);
  if (o.command == "resolve") {
    print_warnings(resolved.warnings);
    fmt::print("{}\n", resolved_to_json(resolved.config));
    return 0;
  }
  if (o.command == "quantize") {
    checkpoint_request req;
    req.inputs = o.inputs;
    req.output = o.output;
    req.config_out = o.config_out;
    req.format = o.checkpoint;
    req.max_shard_size = o.max_shard_size;
    if (o.model_path) req.also_read.push_back({*o.model_path, "the model file"});
    if (o.config_file) req.also_read.push_back({*o.config_file, "the quantization_config file"});
    req.config = resolved.config;
    if (o.model_path) req.model = parse_model(model_text, json_dialect::relaxed);
    req.device = o.device;
    req.threads = o.threads;
    if (isatty(2))
      req.progress = [](std::size_t done, std::size_t total) {
        const int width = 40, filled = static_cast<int>(width * done / (total ? total : 1));
        fmt::print(stderr, "\r[{:=<{}}{:<{}}] {}/{} tensors", "", filled, "", width - filled, done, total);
        if (done == total) fmt::print(stderr, "\n");
      };
    print_warnings(resolved.warnings);
    const auto s = quantize_checkpoint(req);
    print_warnings(s.warnings);
    for (const auto& n : s.notes) fmt::print(stderr, "note: {}\n", n);
    fmt::print(stderr, "{}\n", s.convention);
    fmt::print(stderr, "format: {}\n", to_string(s.format));
    if (!s.files_written.empty()) fmt::print(stderr, "wrote {} files into '{}'\n", s.files_written.size(), o.output);
    if (!s.unmatched.empty()) {
      const std::size_t shown = std::min<std::size_t>(s.unmatched.size(), 5);
      fmt::print(stderr, "note: {} tensors belong to no layer of the model and were copied: {}{}\n", s.unmatched.size(),
                 fmt::join(s.unmatched.begin(), s.unmatched.begin() + static_cast<std::ptrdiff_t>(shown), " "),
                 s.unmatched.size() > 5 ? fmt::format(" (and {} more)", s.unmatched.size() - 5) : "");
    }
    fmt::print(stderr, "quantized {} of {} tensors ({} copied): {:.3f} GB in, {:.3f} GB out, {:.2f} s, {:.2f} GB/s\n",
               s.quantized, s.tensors, s.copied, s.bytes_in / 1e9, s.bytes_out / 1e9, s.seconds,
               s.seconds > 0 ? s.bytes_in / 1e9 / s.seconds : 0.0);
    return 0;
  }
  model = parse_model(model_text, json_dialect::relaxed);
  const auto p = make_plan(resolved.config, *model, o.plan);
  if (o.format == "json") fmt::print("{}\n", plan_to_json(p, *model, resolved.warnings));
  else fmt::print("{}", text::escape_lone_surrogates(plan_to_table(p, *model, resolved.warnings)));
  std::fflush(stdout);
  if (const auto* e = p.first_error()) {
    std::size_t n = 0;
    for (const auto& l : p.layers) n += l.failed();
    fmt::print(stderr, "error: {}\n", text::escape_lone_surrogates(*e));
    if (n > 1) fmt::print(stderr, "({} layers have errors; every one is in the plan output)\n", n);
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  install_signal_cleanup();
  try {
    return run(cli::parse_args(std::vector<std::string>(argv + 1, argv + argc)));
  } catch (const config_errors& e) {
    for (const auto& d : e.all()) fmt::print(stderr, "error: {}\n", text::escape_lone_surrogates(d.text()));
    return 2;
  } catch (const config_error& e) {
    fmt::print(stderr, "error: {}\n", text::escape_lone_surrogates(e.diag().text()));
    return 2;
  } catch (const usage_error& e) {
    fmt::print(stderr, "error: {}\n\n{}", e.what(), usage_text);
    return 1;
  } catch (const qpolicy::io_error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const cuda::cuda_error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: internal error: {}\n", e.what());
    return 1;
  }
}
