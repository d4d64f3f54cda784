// `qpolicy plan --model-dir` (model_dir_plan.hpp): a model directory's layers and checkpoint, and the
// composed plan.
#include "qpolicy/io/model_dir_plan.hpp"

#include <algorithm>
#include <map>

#include "checkpoint_files.hpp"
#include "model_dir.hpp"
#include "qpolicy/io/checkpoint.hpp"

namespace qpolicy {

model_dir_model read_model_dir_model(const std::string& dir, const maybe<model_desc>& model) {
  using namespace checkpoint_io;
  model_dir_model out;
  const auto inv = read_model_dir(dir, true);
  if (inv.quantization_config) out.checkpoint = checkpoint_source_of(inv);
  std::vector<checkpoint_index> indexes;
  const auto files = checkpoint_files(inv.weight_inputs, indexes, out.warnings);
  const auto ck = open_checkpoint(files, indexes);
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensors;
  for (const auto& t : ck.order) tensors.emplace_back(t.info->name, t.info->shape);
  if (out.checkpoint) {
    // The experts' projection names the checkpoint's rules match (Mixtral's w1/w3/w2, else gate/up/down).
    const bool w_names = std::any_of(tensors.begin(), tensors.end(), [](const auto& t) { return t.first.find(".experts.0.w1.") != std::string::npos; });
    if (w_names) out.checkpoint->expert_projections = {"w1", "w3", "w2"};
  }
  if (model) {
    out.model = *model;
    out.convention = "layers from the model file";
  } else {
    out.model = derive_model(out.checkpoint ? source::weight_names_of(tensors, *out.checkpoint) : tensors, &out.convention);
  }
  if (out.checkpoint) {
    // Every module the checkpoint's method quantizes must be stored as its format says.
    check_stored_tensors(ck, *out.checkpoint, out.model);
  }
  return out;
}

void check_quantization_argument(const source::checkpoint_source& checkpoint, const maybe<std::string>& quantization) {
  using source::checkpoint_method;
  // gpt-oss's MXFP4 and ModelOpt claim the checkpoint in their override step, whatever the argument says.
  const auto m = checkpoint.method;
  if (!quantization || m == checkpoint_method::gpt_oss_mxfp4 || m == checkpoint_method::modelopt_fp8 || m == checkpoint_method::modelopt_fp4 ||
      m == checkpoint_method::modelopt_mixed)
    return;
  if (*quantization != checkpoint.quant_method)
    throw config_error("", "Quantization method specified in the model config (" + checkpoint.quant_method +
                               ") does not match the quantization method specified in the `quantization` argument (" + *quantization + ").");
}

composed_plan plan_quantized_model_dir(const model_dir_model& dir, const config_request& request, const plan_options& options) {
  if (!dir.checkpoint) throw std::logic_error("plan_quantized_model_dir takes a quantized model directory");
  // vLLM resolves the arguments when it parses them, then checks them against the checkpoint.
  const auto resolved = resolve(request);
  check_quantization_argument(*dir.checkpoint, request.quantization);
  auto online = make_plan(resolved.config, dir.model, options);
  if (!online.configured) online.release = request.release;
  online.warnings.insert(online.warnings.begin(), resolved.warnings.begin(), resolved.warnings.end());
  return compose(std::move(online), dir.model, *dir.checkpoint);
}

}  // namespace qpolicy
