// A build without nvcc: the CUDA backend's entry points, each refusing with the one sentence of
// qpolicy/kernels/cuda/availability.hpp (what the caller asked for, named). The template entry points
// are instantiated from the registry's lists, as the .cu files instantiate them, so a formula that
// joins the registry links in both builds.
#include <utility>

#include "qpolicy/kernels/cuda/availability.hpp"
#include "qpolicy/kernels/cuda/device_info.hpp"
#include "qpolicy/kernels/cuda/device_memory.hpp"
#include "qpolicy/kernels/cuda/forward.hpp"
#include "qpolicy/kernels/cuda/gemm.hpp"
#include "qpolicy/kernels/cuda/grouped_gemm.hpp"
#include "qpolicy/kernels/cuda/block_quantizer.hpp"
#include "qpolicy/kernels/cuda/weight_only_forward.hpp"
#include "qpolicy/kernels/cuda/quant.hpp"
#include "qpolicy/kernels/cuda/weight_only_gemm.hpp"
#include "qpolicy/schemes/registry.hpp"

namespace qpolicy::cuda {

namespace {
[[noreturn]] void refuse(std::string_view what) { throw cuda_error(without_cuda_sentence(what)); }
/// "quantize layer L on the GPU", or without the layer when the launch names none.
[[noreturn]] void refuse_launch(const char* what, const launch_options& o) {
  refuse(std::string(what) + (o.layer.empty() ? std::string() : " for layer " + o.layer) + " on the GPU");
}
}  // namespace

// Devices and memory.
device_report query_devices() { return {0, without_cuda_sentence("use a CUDA device (configure with nvcc on PATH)"), false}; }
int current_sm() { refuse("query a CUDA device"); }
device_memory::device_memory(std::size_t) { refuse("allocate device memory"); }
device_memory::device_memory(device_memory&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {}
device_memory& device_memory::operator=(device_memory&&) noexcept { return *this; }
device_memory::~device_memory() = default;
void device_memory::reserve(std::size_t) { refuse("allocate device memory"); }
device_memory to_device(const void*, std::size_t) { refuse("copy to a CUDA device"); }
void to_host(const device_memory&, void*, std::size_t) { refuse("copy from a CUDA device"); }
void synchronize() { refuse("wait for a CUDA device"); }
void fill_zero(const device_memory&) { refuse("write device memory"); }
int use_device(int) { refuse("use a CUDA device"); }

// Quantizers.
void weight_kernel<fp8_per_tensor>::run(const input_view&, std::uint8_t*, float*, std::uint32_t*, const launch_options& o) {
  refuse_launch("quantize", o);
}
void weight_kernel<fp8_per_channel>::run(const input_view&, std::uint8_t*, float*, const launch_options& o) { refuse_launch("quantize", o); }
void weight_kernel<fp8_per_block>::run(const input_view&, const fp8::block_options&, std::uint8_t*, float*,
                                       const launch_options& o) {
  refuse_launch("quantize", o);
}
void activation_kernel<fp8_per_token>::run(const input_view&, std::uint8_t*, float*, const launch_options& o) {
  refuse_launch("quantize", o);
}
void activation_kernel<fp8_per_tensor_dynamic>::run(const input_view&, std::uint8_t*, float*, std::uint32_t*, const launch_options& o) {
  refuse_launch("quantize", o);
}
void activation_kernel<fp8_per_block_dynamic>::run(const input_view&, const fp8::group_options&, std::uint8_t*, float*,
                                                   const launch_options& o) {
  refuse_launch("quantize", o);
}
void quantize_segments_per_tensor(const input_view&, const std::int64_t*, std::int64_t, std::uint8_t*, float*, std::uint32_t*,
                                  const launch_options& o) {
  refuse_launch("quantize", o);
}
template <class Formula>
void quantize(const input_view&, const quantized_outputs&, const quantize_options&, std::uint32_t*, const launch_options& o) {
  refuse_launch("quantize", o);
}
void lut_b_dequantize(const std::uint8_t*, const std::uint8_t*, const std::uint8_t*, std::int64_t, std::int64_t, element,
                      std::uint16_t*, const launch_options& o) {
  refuse_launch("decode LUT-B", o);
}
void dequantize(schemes::formula, const stored_tensors&, element, void*, const launch_options& o) { refuse_launch("decode", o); }
void hadamard_rotate(const input_view&, std::int64_t, float*, const launch_options& o) { refuse_launch("rotate", o); }
template <class Formula>
void block_quantizer<Formula>::run(const input_view&, const quantized_outputs&, std::uint32_t*, const quantize_options&, const launch_options& o) {
  refuse_launch("quantize", o);
}

// GEMMs.
struct gemm_runner::state {
  std::string reason;
};
gemm_runner::gemm_runner() { refuse("run the GPU GEMMs"); }
gemm_runner::~gemm_runner() = default;
const std::string& gemm_runner::last_fallback_reason() const { return state_->reason; }
gemm_backend gemm_runner::run(const gemm_problem&, const gemm_operands&, const launch_options& o, gemm_backend) {
  refuse_launch("run a GEMM", o);
}
void gemm_runner::run_bf16(const std::uint16_t*, const std::uint16_t*, std::uint16_t*, std::int64_t, std::int64_t, std::int64_t,
                           const launch_options& o) {
  refuse_launch("run a GEMM", o);
}
std::string grouped_can_implement(const fp8::grouped::problem&, int) { return without_cuda_sentence("run the grouped GEMM"); }
void grouped_gemm(const fp8::grouped::problem&, const fp8::grouped::tile*, std::int64_t, const launch_options& o) {
  refuse_launch("run the grouped GEMM", o);
}
template <class Formula>
void weight_only_gemm(const lp::weight_only::problem&, const std::int64_t*, std::int64_t, const launch_options& o) {
  refuse_launch("run the weight-only GEMM", o);
}
template <class Formula>
void weight_only_gemm_tiles(const lp::weight_only::problem&, const lp::weight_only::tile*, std::int64_t, const launch_options& o) {
  refuse_launch("run the weight-only GEMM", o);
}

// Forward passes.
namespace detail {
std::int64_t upload_linear(const std::vector<std::uint8_t>&, const std::vector<float>&, const std::vector<float>&, bool, std::int64_t,
                           std::int64_t, device_memory&, device_memory&, device_memory&) {
  refuse("run forward passes on the GPU");
}
void upload_experts(const std::vector<std::uint8_t>&, const std::vector<std::uint8_t>&, const std::vector<float>&,
                    const std::vector<float>&, bool, device_experts&) {
  refuse("run forward passes on the GPU");
}
void moe_pipeline(forward_context&, const moe_dims&, const std::uint16_t*, std::int64_t, const cpu::routing&, std::uint16_t*,
                  const moe_projection&) {
  refuse("run forward passes on the GPU");
}
moe_kernel moe_forward(forward_context&, const device_experts&, fp8::weight_scales, fp8::activation_quant, const activation_quantizer&,
                       const std::uint16_t*, std::int64_t, const cpu::routing&, std::uint16_t*) {
  refuse("run forward passes on the GPU");
}
device_quantized_matrices upload_matrices(const std::vector<cpu::quantized_matrix>&) { refuse("run forward passes on the GPU"); }
device_treated treat_activations(forward_context&, schemes::activation_treatment, const std::uint16_t*, std::int64_t, std::int64_t,
                                 std::int64_t) {
  refuse("run forward passes on the GPU");
}
}  // namespace detail

// The template entry points of every formula, as the .cu files instantiate them.
extern const auto quantize_entries = registry::table_of(registry::formula_types, [](auto tag) { return &quantize<decltype(tag)>; });
extern const auto block_quantizer_entries =
    registry::table_of(registry::block_quantizer_formula_types, [](auto tag) { return &block_quantizer<decltype(tag)>::run; });
extern const auto weight_only_entries = registry::table_of(registry::weight_only_formula_types, [](auto tag) {
  using formula = decltype(tag);
  return std::pair{&weight_only_gemm<formula>, &weight_only_gemm_tiles<formula>};
});

}  // namespace qpolicy::cuda
