#pragma once
// Internal to the `qpolicy` executable: the parsed command line, the usage error (exit 1), and the
// commands that live in their own files. Parsing reads no file, so it can be fuzzed alone.
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "qpolicy/io/checkpoint.hpp"
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/io/quantize_tensor.hpp"

namespace qpolicy::cli {

/// Bad command line (exit 1, with the usage text).
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Holds an informational stderr line (a note, a warning, what was derived) until the command ends:
/// print_informed prints the held lines after the command's `error:` line when it fails, so that the
/// error is stderr's first line (cli.md), or once it has succeeded.
void inform(std::string line);
/// Prints and clears the held lines.
void print_informed();

/// The usage text of every command.
extern const char* const usage_text;

/// Walks one command's arguments: values of flags, each single-valued flag at most once.
class arg_reader {
 public:
  arg_reader(const std::vector<std::string>& args, std::string command) : args_(args), command_(std::move(command)) {}
  bool done() const { return i_ >= args_.size(); }
  /// The next argument.
  const std::string& next() { return args_[i_++]; }
  /// The value after flag `name` (its canonical spelling); a second use of the flag is a usage error.
  std::string value(const std::string& name);
  /// `value` for a flag written `--name=VALUE`.
  std::string inline_value(const std::string& name, std::string_view text);
  /// An integer value from `low` to `high`.
  long integer(const std::string& name, long low, long high, const char* expected);
  bool seen(const std::string& name) const { return seen_.count(name) > 0; }

 private:
  std::string once(const std::string& name, std::string v);
  const std::vector<std::string>& args_;
  std::string command_;
  std::size_t i_ = 0;
  std::set<std::string> seen_;
};

/// What a command line asks for.
struct options {
  std::string command;  // resolve, plan, quantize, quantize-tensor, or help
  config_request request;
  maybe<std::string> config_file;  // -c @FILE, read when the command runs
  maybe<std::string> model_path;
  std::string model_dir;  // plan --model-dir DIR
  std::string format = "table";
  plan_options plan;
  // quantize
  std::vector<std::string> inputs;
  std::string output, config_out;
  checkpoint_format checkpoint = checkpoint_format::automatic;
  std::uint64_t max_shard_size = 0;
  unsigned shard_index = 0, shard_count = 1;  // --shard I/N
  bool resume = false;
  std::string finalize;  // --finalize OUT_DIR
  device_kind device = device_kind::cpu;
  unsigned threads = 0;
  // quantize-tensor
  std::string key;
  tensor_quant_options quant;
  bool rotated_out = false;  // --rotated-out: also store T.rotated (the Hadamard keys)
  bool dequantize = false;   // --dequantize: decode KEY's stored tensors back to --dtype
  element dequantize_type = element::bf16;
};

/// Parses `qpolicy ARGS...` (ARGS without the program name); throws usage_error.
options parse_args(const std::vector<std::string>& args);

/// `qpolicy quantize-tensor`; returns the exit status.
int quantize_tensor(const options& o);

}  // namespace qpolicy::cli
