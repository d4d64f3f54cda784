// qpolicy's Python extension (_qpolicy), a thin nanobind layer over the C++ library: the runtime front
// end (resolve, plan) as JSON text plus the errors as (loc, message) pairs, and one formula on one
// tensor. python/qpolicy/__init__.py turns these into dicts, a Plan and ConfigError; nothing is
// computed here that the library does not compute for the CLI, so the results are the CLI's.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "qpolicy/io/io_error.hpp"
#include "qpolicy/io/json_front.hpp"
#include "qpolicy/io/model_dir_plan.hpp"
#include "qpolicy/io/quantize_tensor.hpp"
#include "qpolicy/core/detail/checked.hpp"
#include "qpolicy/numerics/detail/lut_b_tile.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"
#include "qpolicy/version.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using errors = std::vector<std::pair<std::string, std::string>>;

/// Runs fn; a configuration error becomes its (loc, message) list, as the CLI prints them.
template <class Fn>
errors catching(Fn&& fn) {
  try {
    fn();
  } catch (const qpolicy::config_errors& e) {
    errors out;
    for (const auto& d : e.all()) out.emplace_back(d.loc, d.message);
    return out;
  } catch (const qpolicy::config_error& e) {
    return {{e.loc(), e.message()}};
  }
  return {};
}

/// The release named `name` (the Python layer checks the name against releases() first).
qpolicy::vllm_release release_of(const std::optional<std::string>& name) {
  if (!name) return qpolicy::newest_release;
  const auto r = qpolicy::find_release(*name);
  if (!r) throw std::invalid_argument("vllm must be a vLLM release qpolicy knows, one of " + qpolicy::release_names_repr() +
                                      "; got '" + *name + "'");
  return *r;
}

qpolicy::config_request request_of(std::optional<std::string> quantization, std::optional<std::string> config_text, bool legacy,
                                   const std::optional<std::string>& release) {
  qpolicy::config_request r;
  r.release = release_of(release);
  if (quantization) r.quantization = *quantization;
  if (config_text) r.config_text = *config_text;
  r.dialect = qpolicy::json_dialect::strict;
  r.legacy = legacy;
  return r;
}

/// resolve: (the resolved config as `qpolicy resolve` prints it, warnings, errors).
std::tuple<std::string, std::vector<std::string>, errors> resolve(std::optional<std::string> quantization,
                                                                 std::optional<std::string> config_text, bool legacy,
                                                                 std::optional<std::string> release) {
  std::string json;
  std::vector<std::string> warnings;
  const auto request = request_of(std::move(quantization), std::move(config_text), legacy, release);
  auto e = catching([&] {
    const auto r = qpolicy::resolve(request);
    json = qpolicy::resolved_to_json(r.config);
    warnings = r.warnings;
  });
  return {json, warnings, e};
}

/// plan: (the plan as `qpolicy plan --format json` prints it, or "" when resolving or reading the
/// model failed, the table text, errors of the configuration or the model).
std::tuple<std::string, std::string, errors> plan(std::optional<std::string> quantization, std::optional<std::string> config_text,
                                                  bool legacy, const std::string& model_text, bool check_shapes, int tp,
                                                  std::optional<std::string> release) {
  std::string json, table;
  const auto request = request_of(std::move(quantization), std::move(config_text), legacy, release);
  auto e = catching([&] {
    const auto r = qpolicy::resolve(request);
    const auto model = qpolicy::parse_model(model_text, qpolicy::json_dialect::strict);
    qpolicy::plan_options o;
    o.check_shapes = check_shapes;
    o.tp = tp;
    const auto p = qpolicy::make_plan(r.config, model, o);
    json = qpolicy::plan_to_json(p, model, r.warnings);
    table = qpolicy::plan_to_table(p, model, r.warnings);
  });
  return {json, table, e};
}

/// plan_model_dir: (the plan's JSON -- composed with the checkpoint's method for a quantized directory --,
/// the table, errors of the configuration, the model or the checkpoint, an I/O error's text or "").
std::tuple<std::string, std::string, errors, std::string> plan_model_dir(const std::string& dir, std::optional<std::string> quantization,
                                                                         std::optional<std::string> config_text,
                                                                         std::optional<std::string> model_text, bool check_shapes, int tp,
                                                                         std::optional<std::string> release) {
  std::string json, table, io;
  const auto request = request_of(std::move(quantization), std::move(config_text), false, release);
  auto e = catching([&] {
    try {
      qpolicy::maybe<qpolicy::model_desc> given;
      if (model_text) given = qpolicy::parse_model(*model_text, qpolicy::json_dialect::strict);
      const auto d = qpolicy::read_model_dir_model(dir, given);
      qpolicy::plan_options o;
      o.check_shapes = check_shapes;
      o.tp = tp;
      if (d.checkpoint) {
        const auto p = qpolicy::plan_quantized_model_dir(d, request, o);
        json = qpolicy::composed_plan_to_json(p, d.model, d.warnings);
        table = qpolicy::composed_plan_to_table(p, d.model, d.warnings);
        return;
      }
      const auto r = qpolicy::resolve(request);
      auto warnings = d.warnings;
      warnings.insert(warnings.end(), r.warnings.begin(), r.warnings.end());
      const auto p = qpolicy::make_plan(r.config, d.model, o);
      json = qpolicy::plan_to_json(p, d.model, warnings);
      table = qpolicy::plan_to_table(p, d.model, warnings);
    } catch (const qpolicy::io_error& err) {
      io = err.what();
    }
  });
  return {json, table, e, io};
}

nb::dlpack::dtype dlpack_of(qpolicy::dtype t);

/// An owned byte buffer as a NumPy array of `dtype` and `shape` (the buffer moves into the array).
nb::object numpy_array(std::vector<std::uint8_t>&& bytes, qpolicy::dtype type, const std::vector<std::int64_t>& shape) {
  auto* owned = new std::vector<std::uint8_t>(std::move(bytes));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<std::uint8_t>*>(p); });
  std::vector<std::size_t> dims(shape.begin(), shape.end());
  // e4m3fn codes, E8M0 and e4m3 scales and packed e2m1 are bytes.
  return nb::cast(nb::ndarray<nb::numpy>(owned->data(), dims.size(), dims.data(), owner, nullptr, dlpack_of(type)));
}

using named_arrays = std::vector<std::tuple<std::string, std::string, nb::object>>;

std::string dtype_name(qpolicy::dtype t) {
  return t == qpolicy::dtype::f8e4m3fn ? "float8_e4m3fn" : t == qpolicy::dtype::i8 ? "int8" : t == qpolicy::dtype::f32 ? "float32" : "uint8";
}
nb::dlpack::dtype dlpack_of(qpolicy::dtype t) {
  return t == qpolicy::dtype::i8 ? nb::dtype<std::int8_t>() : t == qpolicy::dtype::f32 ? nb::dtype<float>() : nb::dtype<std::uint8_t>();
}

/// A CUDA tensor quantized where it is (DLPack in, torch tensors on the same device out, no copy to the
/// host); the kernels run on the default stream and are finished when this returns.
named_arrays quantize_on_device(qpolicy::schemes::formula formula, const qpolicy::input_view& x,
                                const qpolicy::tensor_quant_options& o, int device) {
  std::vector<qpolicy::device_part> parts;
  std::optional<std::string> failed;
  bool config = false;
  {
    nb::gil_scoped_release release;
    try {
      const int previous = qpolicy::cuda::use_device(device);
      parts = qpolicy::quantize_tensor_parts_on_device(formula, x, o);
      qpolicy::cuda::use_device(previous);
    } catch (const qpolicy::config_error& e) {
      failed = e.diag().text();
      config = true;
    } catch (const qpolicy::cuda::cuda_error& e) {
      failed = e.what();
    }
  }
  if (failed && config) throw nb::value_error(failed->c_str());
  if (failed) throw std::runtime_error(*failed);
  named_arrays out;
  for (auto& p : parts) {
    auto* owned = new qpolicy::cuda::device_memory(std::move(p.memory));
    nb::capsule owner(owned, [](void* q) noexcept { delete static_cast<qpolicy::cuda::device_memory*>(q); });
    std::vector<std::size_t> dims(p.shape.begin(), p.shape.end());
    out.emplace_back(p.suffix, dtype_name(p.type),
                     nb::cast(nb::ndarray<nb::pytorch>(owned->get(), dims.size(), dims.data(), owner, nullptr, dlpack_of(p.type),
                                                       nb::device::cuda::value, device)));
  }
  return out;
}

/// quantize_tensor: [(suffix, dtype name, array)] for formula `key` on a 2-D array `x` of `element`
/// ("bf16", "f16" or "f32"; bf16 may come as uint16 bits).
named_arrays quantize_tensor(
    nb::ndarray<nb::ro, nb::c_contig> x, const std::string& element, const std::string& key, bool ue8m0,
    const std::string& scale_layout, unsigned threads) {
  const auto formula = qpolicy::schemes::find_formula(key);
  if (!formula) throw nb::value_error(("unknown key '" + key + "'; expected one of " + qpolicy::quantize_tensor_keys()).c_str());
  if (x.ndim() != 2) throw nb::value_error(("quantize_tensor takes a 2-D tensor, got " + std::to_string(x.ndim()) + " dimensions").c_str());
  const bool on_device = x.device_type() == nb::device::cuda::value;
  if (!on_device && x.device_type() != nb::device::cpu::value)
    throw nb::value_error("quantize_tensor takes CPU arrays and CUDA tensors");
  if (on_device && !qpolicy::cuda::built_with_cuda)
    throw nb::value_error(qpolicy::cuda::without_cuda_sentence("quantize CUDA tensors; pass CPU arrays (x.cpu())").c_str());
  const auto type = element == "bf16" ? qpolicy::element::bf16 : element == "f16" ? qpolicy::element::f16 : qpolicy::element::f32;
  qpolicy::tensor_quant_options o;
  o.ue8m0 = ue8m0;
  o.threads = threads;
  if (scale_layout == "col") o.layout = qpolicy::fp8::scale_layout::column_major;
  else if (scale_layout == "col-tma") o.layout = qpolicy::fp8::scale_layout::column_major_tma;
  else if (scale_layout == "swizzled") o.swizzled = true;
  else if (scale_layout != "row")
    throw nb::value_error(("unknown scale_layout '" + scale_layout + "'; expected 'row', 'col', 'col-tma' or 'swizzled'").c_str());
  const qpolicy::input_view view{x.data(), type, static_cast<std::int64_t>(x.shape(0)), static_cast<std::int64_t>(x.shape(1))};
  if (on_device) return quantize_on_device(*formula, view, o, x.device_id());
  std::vector<qpolicy::stored_part> parts;
  std::optional<qpolicy::config_error> failed;
  {
    nb::gil_scoped_release release;  // the kernels run on their own threads; Python goes on meanwhile
    try {
      parts = qpolicy::quantize_tensor_parts(*formula, view, o);
    } catch (const qpolicy::config_error& e) {
      failed = e;
    }
  }
  if (failed) throw nb::value_error(failed->diag().text().c_str());
  named_arrays out;
  for (auto& p : parts) out.emplace_back(p.suffix, dtype_name(p.type), numpy_array(std::move(p.bytes), p.type, p.shape));
  return out;
}

/// dequantize_tensor: the parts quantize_tensor returns (codes, scale, the second part) decoded to `dtype`
/// ("bf16", "f16", "f32"): float32 values, or the bf16/fp16 bits as uint16 (the package views them).
nb::object dequantize_tensor(const std::string& key, nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu> codes,
                             nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu> scale,
                             std::optional<nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>> second, const std::string& dtype,
                             const std::string& scale_layout, unsigned threads) {
  const auto formula = qpolicy::schemes::find_formula(key);
  if (!formula) throw nb::value_error(("unknown key '" + key + "'; expected one of " + qpolicy::quantize_tensor_keys()).c_str());
  const auto& f = qpolicy::schemes::formula_of(*formula);
  const auto out_type = dtype == "bf16" ? qpolicy::element::bf16 : dtype == "f16" ? qpolicy::element::f16 : qpolicy::element::f32;
  if (dtype != "bf16" && dtype != "f16" && dtype != "f32")
    throw nb::value_error(("unknown dtype '" + dtype + "'; expected 'bf16', 'f16' or 'f32'").c_str());
  if (scale_layout != "row" && scale_layout != "swizzled")
    throw nb::value_error(("dequantize_tensor reads scale_layout 'row' or 'swizzled', got '" + scale_layout + "'").c_str());
  if (f.tiled() && out_type == qpolicy::element::f32) throw nb::value_error("LUT-B decodes to bf16 or fp16 (new-schemes-numerics.md §B.4), not f32");
  // The codes' shape gives [rows, cols]: [N, K] (packed e2m1: [N, K/2]; LUT-B tiles: [N/8, K/64, 192]).
  const bool tiles = f.codes == qpolicy::schemes::code_format::lut3_tiles;
  if (codes.ndim() != (tiles ? 3u : 2u))
    throw nb::value_error(("codes of " + std::string(f.name) + " are " + (tiles ? "3-D [N/8, K/64, 192]" : "2-D") + ", got " +
                           std::to_string(codes.ndim()) + " dimensions").c_str());
  const auto d0 = static_cast<std::int64_t>(codes.shape(0)), d1 = static_cast<std::int64_t>(codes.shape(1));
  const std::int64_t rows = tiles ? d0 * qpolicy::lp::lut_rows : d0;
  const std::int64_t cols = tiles ? d1 * qpolicy::lp::lut_cols : f.codes == qpolicy::schemes::code_format::e2m1_packed ? d1 * 2 : d1;
  qpolicy::tensor_quant_options o;
  o.swizzled = scale_layout == "swizzled";
  std::vector<qpolicy::stored_part> layout;
  try {
    layout = qpolicy::stored_layout(*formula, rows, cols, o);
  } catch (const qpolicy::config_error& e) {
    throw nb::value_error(e.diag().text().c_str());
  }
  if (layout.size() > 2 && !second)
    throw nb::value_error(("dequantize_tensor needs '" + layout[2].suffix.substr(1) + "' for " + std::string(f.name)).c_str());
  std::vector<std::span<const std::byte>> parts{{static_cast<const std::byte*>(codes.data()), codes.nbytes()},
                                                {static_cast<const std::byte*>(scale.data()), scale.nbytes()}};
  if (layout.size() > 2) parts.emplace_back(static_cast<const std::byte*>(second->data()), second->nbytes());
  o.threads = threads;
  const std::size_t width = out_type == qpolicy::element::f32 ? 4 : 2;
  std::vector<std::uint8_t> out(static_cast<std::size_t>(rows * cols) * width);
  try {
    nb::gil_scoped_release release;
    qpolicy::dequantize_parts(*formula, parts, rows, cols, out_type, out.data(), o);
  } catch (const qpolicy::config_error& e) {
    throw nb::value_error(e.diag().text().c_str());
  }
  const auto shape = std::vector<std::int64_t>{rows, cols};
  auto* owned = new std::vector<std::uint8_t>(std::move(out));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<std::uint8_t>*>(p); });
  const std::size_t dims[2] = {static_cast<std::size_t>(rows), static_cast<std::size_t>(cols)};
  return nb::cast(nb::ndarray<nb::numpy>(owned->data(), 2, dims, owner, nullptr,
                                         width == 4 ? nb::dtype<float>() : nb::dtype<std::uint16_t>()));
}

}  // namespace

NB_MODULE(_qpolicy, m) {
  m.doc() = "qpolicy's C++ library; use the qpolicy package, not this module";
  m.attr("__version__") = QPOLICY_VERSION_STRING;
  m.attr("with_cuda") = qpolicy::cuda::built_with_cuda;
  m.def("resolve", &resolve, "quantization"_a.none(), "config_text"_a.none(), "legacy"_a, "vllm"_a.none());
  m.def("plan", &plan, "quantization"_a.none(), "config_text"_a.none(), "legacy"_a, "model_text"_a, "check_shapes"_a, "tp"_a,
        "vllm"_a.none());
  m.def("plan_model_dir", &plan_model_dir, "directory"_a, "quantization"_a.none(), "config_text"_a.none(), "model_text"_a.none(),
        "check_shapes"_a, "tp"_a, "vllm"_a.none());
  m.def("releases", [] {
    std::vector<std::string> names;
    for (const auto& r : qpolicy::release_table) names.emplace_back(r.name);
    return names;
  });
  m.def("quantize_tensor", &quantize_tensor, "x"_a, "element"_a, "key"_a, "ue8m0"_a, "scale_layout"_a, "threads"_a);
  m.def("dequantize_tensor", &dequantize_tensor, "key"_a, "codes"_a, "scale"_a, "second"_a.none(), "dtype"_a, "scale_layout"_a, "threads"_a);
  m.def("keys", &qpolicy::quantize_tensor_keys);
}
