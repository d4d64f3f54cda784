// libFuzzer target over an already-quantized checkpoint's data: checkpoint_grammar.hpp's structured
// checkpoints (the bytes after the flag byte are its choices) written as a model directory (config.json
// and model.safetensors, whose data repeats a drawn byte, or is cut short). One flag byte: bit 0
// model_type gpt_oss; bits 1-3 the release. Each input runs quantize's reader in process: the directory
// read, the stored tensors checked, every requantized module's stored weight found and decoded (the
// requantizing reader), the kept layers carried into the requested output format. One input in sixteen
// (and every seed) also runs `plan --model-dir` and `quantize` end to end, which must leave the
// directory unchanged and nothing behind when they refuse (quantize_run.hpp). Anything but success,
// config_error or io_error is a finding.
#include <boost/json.hpp>

#include "checkpoint_grammar.hpp"
#include "fuzz_target.hpp"
#include "qpolicy/io/checkpoint.hpp"
#include "qpolicy/io/model_dir_plan.hpp"
#include "qpolicy/plan/composed_plan.hpp"
#include "qpolicy/source/checkpoint_source.hpp"
#include "quantize_run.hpp"
#include "src/io/model_dir.hpp"
#include "src/io/requantize.hpp"

namespace {

namespace fz = qpolicy::fuzz;

/// The model-directory path in process: the directory read as quantize reads it, the stored tensors
/// checked, every requantized module's stored weight found and decoded (the requantizing reader), and
/// the kept layers carried into the requested output format.
void read_directory(const std::filesystem::path& dir, const fz::checkpoint_draw& d, qpolicy::vllm_release release) {
  using namespace qpolicy::checkpoint_io;
  try {
    const auto inv = read_model_dir(dir.string(), true);
    if (!inv.quantization_config) return;
    quantized_input in;
    in.source = checkpoint_source_of(inv);
    in.config = inv.quantization_config->as_object();
    std::vector<checkpoint_index> indexes;
    std::vector<std::string> warnings;
    const auto ck = open_checkpoint(checkpoint_files(inv.weight_inputs, indexes, warnings), indexes);
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> names;
    for (const auto& t : ck.order) names.emplace_back(t.info->name, t.info->shape);
    const auto model = qpolicy::derive_model(qpolicy::source::weight_names_of(names, in.source), nullptr);
    check_stored_tensors(ck, in.source, model);
    const auto p = qpolicy::compose(qpolicy::make_plan(fz::resolved_online(d.online, release), model), model, in.source);
    read_buffers buffers;
    std::vector<std::uint32_t> decoded;
    for (std::size_t i = 0; i < model.layers.size(); ++i) {
      if (p.layers[i].kind != qpolicy::composition::requantized) continue;
      for (const auto& module : stored_modules(model, model.layers[i], in.source.expert_projections)) {
        const auto w = stored_weight_of(ck, in, p.layers[i].checkpoint, module, model.layers[i].name);
        decode_weight(ck, w, buffers, qpolicy::element::bf16, decoded, 1);
        (void)replaced_tensors(ck, w);
      }
    }
    (void)keep_layers(ck, in, model, p, d.format);
  } catch (const qpolicy::config_error&) {
  } catch (const qpolicy::io_error&) {
  }
}

/// `plan --model-dir` and `quantize` on the directory, as the command runs them: the directory must come
/// out unchanged, and a refusal must leave nothing behind.
void run_directory(const fz::checkpoint_draw& d, qpolicy::vllm_release release) {
  qpolicy::config_request r;
  r.config_text = d.online;
  r.release = release;
  r.quantization = d.quantization;
  const auto dir = fz::run_dir() / "in";
  try {
    const auto m = qpolicy::read_model_dir_model(dir.string());
    if (m.checkpoint) (void)qpolicy::composed_plan_to_json(qpolicy::plan_quantized_model_dir(m, r), m.model);
  } catch (const qpolicy::config_error&) {
  } catch (const qpolicy::io_error&) {
  }
  qpolicy::checkpoint_request req;
  req.inputs = {dir.string()};
  req.output = (fz::run_dir() / "out").string();
  req.quantization = d.quantization;
  req.format = d.format;
  req.threads = 1;
  req.config = fz::resolved_online(d.online, release);
  fz::quantize_and_check(req, {"in"});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto release = static_cast<qpolicy::vllm_release>(((data[0] >> 1) & 7) % 5);
  fz::choices c{data + 1, size - 1};
  const auto d = fz::draw_checkpoint(c, data[0] & 1);
  const auto dir = fz::run_dir() / "in";
  fz::write_model_dir(dir, d);
  read_directory(dir, d, release);
  if (d.end_to_end) run_directory(d, release);
  return 0;
}

std::vector<std::string> qpolicy::fuzz::seeds() {
  auto out = fz::structured_seeds();
  // Found by this target: block scales of [N, floor(K/32)] passed the header check for K not a multiple of
  // 32, and the decoder read ceil(K/32) a row past them; INT8 pack-quantized row scales of another width
  // passed it too (their columns follow weight_shape for grouped scales), and the decoder read N of them.
  out.push_back(std::string("\x32\x01\x01\x00\xf5\xff\xff\xff\x00\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x98\x04\x01\x00\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x94\x04\xff\xff", 73));
  out.push_back(std::string("\x98\xaf\x02\x00\x00\x98\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xa3\x00\x00\x79\x65\x72\x73\x2e\x30\x2e\x00\x6d\x01\x00\xaf\x02\x00\x00\x98\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x47\x00\x00\x00\x00\x00\x00\x00\x04\x00", 93));
  return out;
}
