// Builds without nvcc: the CUDA entry points exist and say that CUDA is not built in.
#include <array>
#include <utility>
#include "qpolicy/kernels/cuda/quant.hpp"

namespace qpolicy::cuda {

namespace {
[[noreturn]] void not_built(const launch_options& o) {
  throw cuda_error("qpolicy was built without CUDA (nvcc not found at configure time)" +
                   (o.layer.empty() ? std::string() : "; cannot quantize layer " + o.layer + " on the GPU"));
}
}  // namespace

void weight_kernel<fp8_per_tensor>::run(const input_view&, std::uint8_t*, float*, std::uint32_t*,
                                        const launch_options& o) { not_built(o); }
void weight_kernel<fp8_per_channel>::run(const input_view&, std::uint8_t*, float*, const launch_options& o) {
  not_built(o);
}
void weight_kernel<fp8_per_block>::run(const input_view&, const cpu::reference::block_options&, std::uint8_t*,
                                       float*, const launch_options& o) { not_built(o); }
void activation_kernel<fp8_per_token>::run(const input_view&, std::uint8_t*, float*, const launch_options& o) {
  not_built(o);
}
void activation_kernel<fp8_per_tensor_dynamic>::run(const input_view&, std::uint8_t*, float*, std::uint32_t*,
                                                    const launch_options& o) { not_built(o); }
void activation_kernel<fp8_per_block_dynamic>::run(const input_view&, const cpu::reference::group_options&,
                                                   std::uint8_t*, float*, const launch_options& o) { not_built(o); }
void quantize_segments_per_tensor(const input_view&, const std::int64_t*, std::int64_t, std::uint8_t*, float*,
                                  std::uint32_t*, const launch_options& o) {
  not_built(o);
}

template <class Key>
void quantize_host_tensor(const input_view&, const cpu::reference::block_options&,
                          const cpu::reference::group_options&, std::uint8_t*, float*, std::size_t,
                          const launch_options& o) {
  not_built(o);
}

template <class Key>
void quantize_device_tensor(const input_view&, const cpu::reference::block_options&, const cpu::reference::group_options&,
                            std::uint8_t*, float*, const launch_options& o) {
  not_built(o);
}

// Instantiated for every key, as quant.cu does.
extern const auto quantize_host_tensor_entries = detail::every_key_entry(std::make_index_sequence<key_count>{});

}  // namespace qpolicy::cuda
