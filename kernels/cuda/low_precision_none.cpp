// Builds without nvcc: the low-precision CUDA entry points exist and say that CUDA is not built in.
#include <array>
#include <string>
#include <utility>

#include "qpolicy/kernels/cuda/low_precision.hpp"

namespace qpolicy::cuda {

namespace {
[[noreturn]] void not_built(const launch_options& o) {
  throw cuda_error("qpolicy was built without CUDA (nvcc not found at configure time)" +
                   (o.layer.empty() ? std::string() : "; cannot quantize " + o.layer + " on the GPU"));
}
}  // namespace

template <class Formula>
void lp_kernel<Formula>::run(const input_view&, const lp::outputs&, std::uint32_t*, const launch_options& o,
                             std::optional<float>) {
  not_built(o);
}
template <class Formula>
void quantize_host_low_precision(const input_view&, const lp::outputs&, const launch_options& o, std::optional<float>) {
  not_built(o);
}

namespace detail {
template <std::size_t... I>
auto every_formula(std::index_sequence<I...>) {
  return std::array{std::pair{&lp_kernel<formula_tag<static_cast<schemes::lp_formula>(I)>>::run,
                              &quantize_host_low_precision<formula_tag<static_cast<schemes::lp_formula>(I)>>}...};
}
const void* lp_kernel_table() {
  static const auto table = every_formula(std::make_index_sequence<schemes::lp_formula_count>{});
  return &table;
}
}  // namespace detail

}  // namespace qpolicy::cuda
