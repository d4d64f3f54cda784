// The command line of cli.md, parsed without touching any file.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include "cli.hpp"

namespace qpolicy::cli {

const char* const usage_text =
    "usage: qpolicy resolve [--legacy | --vllm X.Y] [-q NAME] [-c JSON|@FILE]\n"
    "       qpolicy plan [--legacy | --vllm X.Y] [-q NAME] [-c JSON|@FILE] --model MODEL.json [--format table|json]\n"
    "       qpolicy plan [--legacy | --vllm X.Y] [-q NAME] [-c JSON|@FILE] --model-dir DIR [--model MODEL.json] [--format table|json]\n"
    "                    [--check-shapes [--tp N]]\n"
    "       qpolicy quantize [--legacy | --vllm X.Y] [-q NAME] [-c JSON|@FILE] [--model MODEL.json] MODEL_DIR -o OUT_DIR\n"
    "                    [--format vllm-fp8|compressed-tensors] [--max-shard-size SIZE] [--shard I/N] [--resume]\n"
    "                    [--device cpu|cuda] [--threads N]\n"
    "       qpolicy quantize --finalize OUT_DIR\n"
    "       qpolicy quantize [--legacy | --vllm X.Y] [-q NAME] [-c JSON|@FILE] [--model MODEL.json] INPUT... -o OUTPUT.safetensors\n"
    "                    [--config-out CONFIG.json] [--format vllm-fp8|compressed-tensors] [--device cpu|cuda] [--threads N]\n"
    "       qpolicy quantize-tensor --key KEY [--ue8m0] [--scale-layout row|col|col-tma|swizzled] [--rotated-out]\n"
    "                    [--device cpu|cuda] [--threads N] INPUT.safetensors -o OUTPUT.safetensors\n"
    "       qpolicy quantize-tensor --key KEY --dequantize [--dtype bf16|f16|f32] [--scale-layout row|swizzled] [--device cpu|cuda]\n"
    "                    [--threads N] INPUT.safetensors -o OUTPUT.safetensors\n"
    "       qpolicy [COMMAND] -h|--help\n"
    "       qpolicy --version\n"
    "\n"
    "  -q, --quantization NAME        vLLM's quantization argument (online shorthand, 'online', or a\n"
    "                                 checkpoint method such as 'fp8'); absent means None\n"
    "  -c, --quantization-config ARG  vLLM's quantization_config as JSON text or @file.json (files may\n"
    "                                 hold comments and trailing commas); absent means None\n"
    "  --vllm X.Y                     the vLLM release whose rules to follow: 0.30, 0.31, 0.32, 0.33 or 0.34\n"
    "                                 (default: 0.34, the newest)\n"
    "  --legacy                       the legacy schema (global_scheme, *_scheme_override, ignore)\n"
    "  --model FILE                   the model's layer list (MODEL.json)\n"
    "  --model-dir DIR                a Hugging Face model directory: its layers (from the tensor names, unless\n"
    "                                 --model), and for a quantized one its checkpoint's method composed with\n"
    "                                 the online config as the release does (kept, requantized, online)\n"
    "  --format table|json            plan output (default: table)\n"
    "  --format vllm-fp8|compressed-tensors\n"
    "                                 quantize's checkpoint format (default: vllm-fp8 when every quantized layer is\n"
    "                                 fp8_per_block, compressed-tensors otherwise: the ones vLLM and transformers load)\n"
    "  --max-shard-size SIZE          shard size of an output directory (5GB, 500MB, 2GiB, bytes; default: the\n"
    "                                 input's shards)\n"
    "  --shard I/N                    write output shards k with k % N == I (process I of N into one OUT_DIR);\n"
    "                                 the last to finish (or --finalize OUT_DIR) completes the directory\n"
    "  --resume                       keep the shards of an unfinished OUT_DIR that their manifests prove complete\n"
    "  --check-shapes, --tp N         check each scheme against the layers' shapes on N ranks\n"
    "  --key KEY                      an FP8 quant key (fp8_per_tensor_static, fp8_per_tensor_dynamic, fp8_per_token,\n"
    "                                 fp8_per_channel_static, fp8_per_block_static, fp8_per_block_dynamic) or a\n"
    "                                 low-precision formula (mxfp8, mxfp8_dynamic, mxfp4, mxfp4_dynamic,\n"
    "                                 int8_per_channel_static, nvfp4, nvfp4_per_token)\n"
    "  -o, --output FILE              the output file: written beside it, renamed into place when complete;\n"
    "                                 it may not be an input, another output, or anything but a regular file\n"
    "\n"
    "exit status: 0 ok, 2 invalid configuration/model/tensor data or paths, 1 usage or I/O error\n";

std::string arg_reader::once(const std::string& name, std::string v) {
  if (!seen_.insert(name).second) throw usage_error(fmt::format("{} is given twice; it takes one value", name));
  return v;
}

std::string arg_reader::value(const std::string& name) {
  if (done()) throw usage_error(fmt::format("{} needs a value", name));
  return once(name, next());
}

std::string arg_reader::inline_value(const std::string& name, std::string_view text) { return once(name, std::string(text)); }

long arg_reader::integer(const std::string& name, long low, long high, const char* expected) {
  const auto v = value(name);
  std::size_t used = 0;
  long n = 0;
  try {
    n = std::stol(v, &used);
  } catch (...) {
    used = 0;
  }
  if (v.empty() || used != v.size() || n < low || n > high) throw usage_error(fmt::format("{} must be {}, got '{}'", name, expected, v));
  return n;
}

namespace {

/// "a, b or c": how usage errors list the choices.
template <class Names>
std::string or_list(const Names& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += fmt::format("{}{}", i == 0 ? "" : i + 1 == names.size() ? " or " : ", ", names[i]);
  return out;
}

/// The commands, as messages list them.
constexpr std::array<std::string_view, 4> commands{"resolve", "plan", "quantize", "quantize-tensor"};

/// A flag's value from a closed list of choices; anything else is a usage error listing them.
template <class T, std::size_t N>
T choose(const std::string& flag, const std::string& v, const std::array<std::pair<std::string_view, T>, N>& choices) {
  for (const auto& [name, value] : choices)
    if (name == v) return value;
  std::array<std::string_view, N> names{};
  for (std::size_t i = 0; i < N; ++i) names[i] = choices[i].first;
  throw usage_error(fmt::format("{} must be {}, got '{}'", flag, or_list(names), v));
}

device_kind parse_device(arg_reader& r) {
  constexpr std::array<std::pair<std::string_view, device_kind>, 2> devices{{{"cpu", device_kind::cpu}, {"cuda", device_kind::cuda}}};
  return choose("--device", r.value("--device"), devices);
}

void parse_quantize_tensor(arg_reader& r, options& o) {
  std::string input;
  bool dtype_given = false;
  while (!r.done()) {
    const auto& a = r.next();
    if (a == "-h" || a == "--help") {
      o.command = "help";
      return;
    }
    if (a == "--key") o.key = r.value("--key");
    else if (a == "--ue8m0") o.quant.ue8m0 = true;
    else if (a == "--scale-layout") {
      // swizzled: the 128x4 layout of the low-precision block scales; the others lay out 1x128 groups.
      enum class layout : std::uint8_t { row, col, col_tma, swizzled };
      constexpr std::array<std::pair<std::string_view, layout>, 4> layouts{
          {{"row", layout::row}, {"col", layout::col}, {"col-tma", layout::col_tma}, {"swizzled", layout::swizzled}}};
      const auto l = choose("--scale-layout", r.value("--scale-layout"), layouts);
      o.quant.swizzled = l == layout::swizzled;
      o.quant.layout = l == layout::col ? fp8::scale_layout::column_major
                       : l == layout::col_tma ? fp8::scale_layout::column_major_tma
                                              : fp8::scale_layout::row_major;
    } else if (a == "--device") o.quant.device = parse_device(r);
    else if (a == "--rotated-out") o.rotated_out = true;
    else if (a == "--dequantize") o.dequantize = true;
    else if (a == "--dtype") {
      constexpr std::array<std::pair<std::string_view, element>, 3> types{
          {{"bf16", element::bf16}, {"f16", element::f16}, {"f32", element::f32}}};
      o.dequantize_type = choose("--dtype", r.value("--dtype"), types);
      dtype_given = true;
    } else if (a == "--threads") o.quant.threads = static_cast<unsigned>(r.integer("--threads", 1, 4096, "an integer from 1 to 4096"));
    else if (a == "-o" || a == "--output") o.output = r.value("-o");
    else if (!a.empty() && a[0] == '-') throw usage_error(fmt::format("unknown option '{}' for quantize-tensor", a));
    else if (o.inputs.empty()) o.inputs.push_back(a);
    else throw usage_error(fmt::format("quantize-tensor takes one input file, got '{}' and '{}'", o.inputs.front(), a));
  }
  if (o.key.empty()) throw usage_error("quantize-tensor needs --key KEY");
  if (dtype_given && !o.dequantize) throw usage_error("--dtype is the output type of --dequantize");
  if (o.dequantize && o.rotated_out) throw usage_error("--rotated-out stores the rotation of a quantized input; --dequantize decodes");
  if (o.inputs.empty()) throw usage_error("quantize-tensor needs an INPUT.safetensors");
  if (o.output.empty()) throw usage_error("quantize-tensor needs -o OUTPUT.safetensors");
}

void set_config(options& o, const std::string& v) {
  if (!v.empty() && v[0] == '@') {
    o.config_file = v.substr(1);
    o.request.dialect = json_dialect::relaxed;
  } else {
    o.request.config_text = v;
    o.request.dialect = json_dialect::strict;
  }
}

}  // namespace

options parse_args(const std::vector<std::string>& all) {
  options o;
  if (all.empty()) throw usage_error(fmt::format("missing command ({})", or_list(commands)));
  o.command = all[0];
  if (o.command == "-h" || o.command == "--help") {
    o.command = "help";
    return o;
  }
  if (o.command == "--version") {
    if (all.size() > 1) throw usage_error(fmt::format("--version takes nothing else, got '{}'", all[1]));
    o.command = "version";
    return o;
  }
  const std::vector<std::string> args(all.begin() + 1, all.end());
  arg_reader r(args, o.command);
  if (o.command == "quantize-tensor") {
    parse_quantize_tensor(r, o);
    return o;
  }
  if (std::find(commands.begin(), commands.end(), o.command) == commands.end())
    throw usage_error(fmt::format("unknown command '{}'; expected {}", o.command, or_list(commands)));
  const bool plan = o.command == "plan", quantize = o.command == "quantize";
  while (!r.done()) {
    const auto& a = r.next();
    if (a == "-h" || a == "--help") {
      o.command = "help";
      return o;
    }
    if (a == "--legacy") o.request.legacy = true;
    else if (a == "--vllm" || a.rfind("--vllm=", 0) == 0) {
      const auto v = a == "--vllm" ? r.value("--vllm") : r.inline_value("--vllm", std::string_view(a).substr(7));
      const auto release = find_release(v);
      if (!release)
        throw usage_error(fmt::format("--vllm must be a vLLM release qpolicy knows, one of {}; got '{}'", release_names_repr(), v));
      o.request.release = *release;
    }
    else if (a == "-q" || a == "--quantization") o.request.quantization = r.value("-q");
    else if (a.rfind("--quantization=", 0) == 0) o.request.quantization = r.inline_value("-q", std::string_view(a).substr(15));
    else if (a == "-c" || a == "--quantization-config") set_config(o, r.value("-c"));
    else if (a == "--model" && (plan || quantize)) o.model_path = r.value("--model");
    else if (a == "--model-dir" && plan) o.model_dir = r.value("--model-dir");
    else if ((a == "-o" || a == "--output") && quantize) o.output = r.value("-o");
    else if (a == "--config-out" && quantize) o.config_out = r.value("--config-out");
    else if (a == "--device" && quantize) o.device = parse_device(r);
    else if (a == "--threads" && quantize) o.threads = static_cast<unsigned>(r.integer("--threads", 1, 4096, "an integer from 1 to 4096"));
    else if (quantize && !a.empty() && a[0] != '-') o.inputs.push_back(a);
    else if (a == "--format" && quantize) {
      constexpr std::array<std::pair<std::string_view, checkpoint_format>, 2> formats{
          {{"vllm-fp8", checkpoint_format::vllm_fp8}, {"compressed-tensors", checkpoint_format::compressed_tensors}}};
      o.checkpoint = choose("--format", r.value("--format"), formats);
    } else if (a == "--max-shard-size" && quantize) {
      const auto v = r.value("--max-shard-size");
      const auto size = parse_byte_size(v);
      if (!size)
        throw usage_error(fmt::format("--max-shard-size must be a positive size such as 5GB, 500MB, 2GiB or a number of bytes, "
                                      "got '{}'", v));
      o.max_shard_size = *size;
    } else if (a == "--shard" && quantize) {
      const auto v = r.value("--shard");
      const auto slash = v.find('/');
      unsigned long i = 0, n = 0;
      std::size_t used_i = 0, used_n = 0;
      try {
        if (slash != std::string::npos && slash > 0 && slash + 1 < v.size() && v[0] != '-' && v[slash + 1] != '-') {
          i = std::stoul(v.substr(0, slash), &used_i);
          n = std::stoul(v.substr(slash + 1), &used_n);
        }
      } catch (...) {
        used_i = 0;
      }
      if (slash == std::string::npos || used_i != slash || used_n != v.size() - slash - 1 || n == 0 || n > 65536 || i >= n)
        throw usage_error(fmt::format("--shard must be I/N with 0 <= I < N <= 65536 (this process's index and the process count), "
                                      "got '{}'", v));
      o.shard_index = static_cast<unsigned>(i);
      o.shard_count = static_cast<unsigned>(n);
    } else if (a == "--resume" && quantize) o.resume = true;
    else if (a == "--finalize" && quantize) o.finalize = r.value("--finalize");
    else if (a == "--format" && plan) {
      constexpr std::array<std::pair<std::string_view, std::string_view>, 2> formats{{{"table", "table"}, {"json", "json"}}};
      o.format = std::string(choose("--format", r.value("--format"), formats));
    } else if (a == "--check-shapes" && plan) o.plan.check_shapes = true;
    else if (a == "--tp" && plan) o.plan.tp = static_cast<int>(r.integer("--tp", 1, 2147483647, "a positive integer"));
    else throw usage_error(fmt::format("unknown option '{}' for {}", a, o.command));
  }
  if (plan && !o.model_path && o.model_dir.empty()) throw usage_error("plan needs --model MODEL.json or --model-dir DIR");
  if (o.request.legacy && r.seen("--vllm"))
    throw usage_error("--legacy is a schema of its own (in no vLLM release from 0.29 on); it takes no --vllm");
  if (r.seen("--tp") && !o.plan.check_shapes) throw usage_error("--tp only applies to --check-shapes; add --check-shapes or drop --tp");
  if (quantize && !o.finalize.empty()) {
    if (!o.inputs.empty() || !o.output.empty() || r.seen("-q") || r.seen("-c") || r.seen("--shard") || o.resume)
      throw usage_error("--finalize OUT_DIR takes nothing else: the unfinished directory records its conversion");
    return o;
  }
  if (quantize && o.output.empty()) throw usage_error("quantize needs -o OUT_DIR (or -o OUTPUT.safetensors for file inputs)");
  if (quantize && o.inputs.empty()) throw usage_error("quantize needs an input (a model directory, .safetensors files or a .index.json)");
  return o;
}

}  // namespace qpolicy::cli
