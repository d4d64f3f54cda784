// `qpolicy`: the command line of cli.md over the C++ API.
#include <unistd.h>

#include <fmt/format.h>

#include "qpolicy/version.hpp"
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "qpolicy/kernels/cpu/cpu_target.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"
#include "qpolicy/io/checkpoint.hpp"
#include "qpolicy/io/io_error.hpp"
#include "qpolicy/io/detail/paths.hpp"
#include "qpolicy/io/detail/staged_output.hpp"
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/io/model_dir_plan.hpp"

namespace {

using namespace qpolicy;

using cli::usage_error;
using cli::usage_text;

void print_warnings(const std::vector<std::string>& warnings) {
  for (const auto& w : warnings) cli::inform("warning: " + text::escape_lone_surrogates(w));
}

/// "1.23 GB" or "45.6 MB".
std::string size_text(double bytes) { return bytes >= 1e9 ? fmt::format("{:.2f} GB", bytes / 1e9) : fmt::format("{:.1f} MB", bytes / 1e6); }

/// QPOLICY_PROGRESS_INTERVAL's seconds: a finite number, 0 or more, and nothing after it (empty is unset).
std::optional<double> progress_interval(const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(v) || v < 0) return std::nullopt;
  return v;
}

/// The first environment setting this command or the library would misread, as an error sentence;
/// checked before any work, so that a typo is never a silent default.
std::optional<std::string> environment_problem() {
  if (auto problem = cpu::cpu_target_setting_problem()) return problem;
  if (const char* v = std::getenv("QPOLICY_PROGRESS_INTERVAL"); v && *v && !progress_interval(v))
    return fmt::format("QPOLICY_PROGRESS_INTERVAL is '{}'; expected a number of seconds, 0 or more", v);
  return std::nullopt;
}

/// Progress of a conversion on stderr: a bar with throughput and ETA redrawn on a terminal; otherwise
/// a plain line every QPOLICY_PROGRESS_INTERVAL seconds (default 10), for logs.
std::function<void(std::uint64_t, std::uint64_t, std::size_t, std::size_t)> progress_reporter(bool terminal) {
  const char* env = std::getenv("QPOLICY_PROGRESS_INTERVAL");
  const double interval = env && *env ? progress_interval(env).value_or(0.0) : terminal ? 0.2 : 10.0;
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  return [=](std::uint64_t bytes, std::uint64_t total, std::size_t done, std::size_t tensors) mutable {
    const auto now = std::chrono::steady_clock::now();
    const bool finished = done == tensors;
    if (!finished && std::chrono::duration<double>(now - last).count() < interval) return;
    if (finished && !terminal) return;  // the summary line follows
    last = now;
    const double seconds = std::chrono::duration<double>(now - start).count();
    const double rate = seconds > 0 ? static_cast<double>(bytes) / seconds : 0.0;
    const double fraction = total ? static_cast<double>(bytes) / static_cast<double>(total) : 1.0;
    const std::string eta = rate > 0 && !finished ? fmt::format(", ETA {:.0f} s", static_cast<double>(total - bytes) / rate) : "";
    if (terminal) {
      const int width = 30, filled = static_cast<int>(width * fraction);
      fmt::print(stderr, "\r[{:=<{}}{:<{}}] {:3.0f}% {} of {}, {:.2f} GB/s{}   ", "", filled, "", width - filled, 100 * fraction,
                 size_text(static_cast<double>(bytes)), size_text(static_cast<double>(total)), rate / 1e9, eta);
      if (finished) fmt::print(stderr, "\n");
    } else {
      fmt::print(stderr, "progress: {:.0f}% ({} of {}, {} of {} tensors, {:.2f} GB/s{})\n", 100 * fraction,
                 size_text(static_cast<double>(bytes)), size_text(static_cast<double>(total)), done, tensors, rate / 1e9, eta);
    }
  };
}

/// Prints a plan's text to stdout; with a failed layer, its error (and how many failed) to stderr and exit 2.
int print_plan_text(const std::string& text, const std::string* first_error, std::size_t failed) {
  fmt::print("{}", text);
  std::fflush(stdout);
  if (!first_error) return 0;
  fmt::print(stderr, "error: {}\n", text::escape_lone_surrogates(*first_error));
  if (failed > 1) fmt::print(stderr, "({} layers have errors; every one is in the plan output)\n", failed);
  cli::print_informed();
  return 2;
}

/// A composed plan (plan --model-dir of a quantized model) in the requested format.
int print_composed_plan(const composed_plan& p, const model_desc& model, const std::string& format) {
  std::size_t failed = 0;
  for (const auto& l : p.layers) failed += l.failed();
  return print_plan_text(format == "json" ? composed_plan_to_json(p, model) + "\n" : text::escape_lone_surrogates(composed_plan_to_table(p, model)),
                         p.first_error(), failed);
}

int run(const cli::options& o) {
  if (o.command == "version") {
    fmt::print("qpolicy {} ({})\n", QPOLICY_VERSION_STRING,
               QPOLICY_WITH_CUDA ? "CPU and CUDA kernels, sm_90a and sm_90" : "CPU kernels; built without CUDA");
    return 0;
  }
  if (o.command == "help") {
    fmt::print("{}", usage_text);
    return 0;
  }
  if (o.command == "quantize-tensor") return cli::quantize_tensor(o);
  if (o.command == "quantize" && !o.finalize.empty()) {
    const auto s = finalize_model_dir(o.finalize);
    cli::print_informed();
    for (const auto& n : s.notes) fmt::print(stderr, "note: {}\n", n);
    if (s.finished && !s.files_written.empty()) fmt::print(stderr, "finished '{}': all {} shards complete\n", o.finalize, s.shards_total);
    return 0;
  }
  // Read the files first so that an unreadable one is an I/O error, not masked by the config.
  auto request = o.request;
  if (o.config_file) request.config_text = read_input_file(*o.config_file, "the quantization_config file");
  std::optional<model_desc> model;
  std::string model_text;
  if (o.model_path) model_text = read_input_file(*o.model_path, "the model file");
  const auto resolved = resolve(request);
  if (o.command == "resolve") {
    print_warnings(resolved.warnings);
    cli::print_informed();
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
    req.shard_index = o.shard_index;
    req.shard_count = o.shard_count;
    req.resume = o.resume;
    if (o.model_path) req.also_read.push_back({*o.model_path, "the model file"});
    if (o.config_file) req.also_read.push_back({*o.config_file, "the quantization_config file"});
    req.config = resolved.config;
    req.quantization = request.quantization;
    if (o.model_path) req.model = parse_model(model_text, json_dialect::relaxed);
    req.device = o.device;
    req.threads = o.threads;
    req.progress = progress_reporter(isatty(2) != 0);
    print_warnings(resolved.warnings);
    checkpoint_summary s;
    try {
      s = quantize_checkpoint(req);
    } catch (const io_error& e) {
      // A failed write keeps a model directory's complete shards: say how to go on.
      if (!std::filesystem::exists(std::filesystem::path(o.output) / ".qpolicy" / "run.json")) throw;
      fmt::print(stderr, "error: {}\nnote: '{}' is unfinished (no config.json); its complete shards stay, and the same command with "
                 "--resume finishes it\n", e.what(), o.output);
      cli::print_informed();
      return 1;
    }
    print_warnings(s.warnings);
    cli::print_informed();
    for (const auto& n : s.notes) fmt::print(stderr, "note: {}\n", n);
    fmt::print(stderr, "{}\n", s.convention);
    for (const auto& line : s.composition) fmt::print(stderr, "{}\n", line);
    fmt::print(stderr, "format: {}\n", to_string(s.format));
    for (const auto& r : s.rotations) fmt::print(stderr, "rotation: {}\n", r);
    if (s.shards_total) {
      fmt::print(stderr, "wrote {} of {} shards into '{}'{}{}\n", s.shards_written, s.shards_total, o.output,
                 s.shards_kept ? fmt::format(" (kept {} complete ones)", s.shards_kept) : "",
                 o.shard_count > 1 ? fmt::format(" as shard {}/{}", o.shard_index, o.shard_count) : "");
      if (s.finished) fmt::print(stderr, "finished '{}': config.json, the index and the plan are written\n", o.output);
      else
        fmt::print(stderr, "not finished yet: {} of {} shards are complete; the last --shard process to finish, or "
                   "`qpolicy quantize --finalize {}`, completes the directory\n", s.shards_complete, s.shards_total, o.output);
    }
    if (!s.unmatched.empty()) {
      const std::size_t shown = std::min<std::size_t>(s.unmatched.size(), 5);
      fmt::print(stderr, "note: {} tensors belong to no layer of the model and were copied: {}{}\n", s.unmatched.size(),
                 fmt::join(s.unmatched.begin(), s.unmatched.begin() + static_cast<std::ptrdiff_t>(shown), " "),
                 s.unmatched.size() > 5 ? fmt::format(" (and {} more)", s.unmatched.size() - 5) : "");
    }
    fmt::print(stderr, "quantized {} of {} tensors ({}{} copied): {:.3f} GB in, {:.3f} GB out, {:.2f} s, {:.2f} GB/s\n",
               s.quantized, s.tensors,
               s.requantized ? fmt::format("{} decoded from the checkpoint's format first, {} of their stored tensors dropped, ", s.requantized, s.replaced)
                             : std::string(),
               s.copied, s.bytes_in / 1e9, s.bytes_out / 1e9, s.seconds,
               s.seconds > 0 ? s.bytes_in / 1e9 / s.seconds : 0.0);
    return 0;
  }
  if (o.model_path) model = parse_model(model_text, json_dialect::relaxed);
  if (!o.model_dir.empty()) {
    const auto dir = read_model_dir_model(o.model_dir, model ? maybe<model_desc>(*model) : maybe<model_desc>());
    print_warnings(dir.warnings);
    cli::inform(dir.convention);
    if (dir.checkpoint) return print_composed_plan(plan_quantized_model_dir(dir, request, o.plan), dir.model, o.format);
    model = dir.model;
  }
  const auto p = make_plan(resolved.config, *model, o.plan);
  std::size_t failed = 0;
  for (const auto& l : p.layers) failed += l.failed();
  return print_plan_text(o.format == "json" ? plan_to_json(p, *model, resolved.warnings) + "\n"
                                            : text::escape_lone_surrogates(plan_to_table(p, *model, resolved.warnings)),
                         p.first_error(), failed);
}

}  // namespace

namespace qpolicy::cli {

namespace {
std::vector<std::string>& informed_lines() {
  static std::vector<std::string> lines;
  return lines;
}
}  // namespace

void inform(std::string line) { informed_lines().push_back(std::move(line)); }

void print_informed() {
  for (const auto& line : informed_lines()) fmt::print(stderr, "{}\n", line);
  informed_lines().clear();
}

}  // namespace qpolicy::cli

namespace {

/// The command's outcome: its status, after the held informational lines (which follow an error line).
int exit_with(int status) {
  cli::print_informed();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  install_signal_cleanup();
  if (const auto problem = environment_problem()) {
    fmt::print(stderr, "error: {}\n", *problem);
    return 1;
  }
  try {
    return exit_with(run(cli::parse_args(std::vector<std::string>(argv + 1, argv + argc))));
  } catch (const config_errors& e) {
    for (const auto& d : e.all()) fmt::print(stderr, "error: {}\n", text::escape_lone_surrogates(d.text()));
    return exit_with(2);
  } catch (const config_error& e) {
    fmt::print(stderr, "error: {}\n", text::escape_lone_surrogates(e.diag().text()));
    return exit_with(2);
  } catch (const usage_error& e) {
    fmt::print(stderr, "error: {}\n\n{}", e.what(), usage_text);
    return exit_with(1);
  } catch (const qpolicy::io_error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return exit_with(1);
  } catch (const cuda::cuda_error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return exit_with(1);
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "error: out of memory\n");
    return exit_with(1);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: internal error: {}\n", e.what());
    return exit_with(1);
  }
}
