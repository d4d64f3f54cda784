// Builds without nvcc: the weight-only GEMM exists and says that CUDA is not built in.
#include <string>

#include "qpolicy/kernels/cuda/weight_only_gemm.hpp"

namespace qpolicy::cuda {

template <class Formula>
void weight_only_gemm(const lp::weight_only::problem&, const std::int64_t*, std::int64_t, const launch_options& o) {
  throw cuda_error("qpolicy was built without CUDA (nvcc not found at configure time)" +
                   (o.layer.empty() ? std::string() : "; cannot run layer " + o.layer + " on the GPU"));
}

template <class Formula>
void weight_only_gemm_tiles(const lp::weight_only::problem&, const lp::weight_only::tile*, std::int64_t, const launch_options& o) {
  throw cuda_error("qpolicy was built without CUDA (nvcc not found at configure time)" +
                   (o.layer.empty() ? std::string() : "; cannot run layer " + o.layer + " on the GPU"));
}

// The weight formulas (schemes/formulas.hpp rows with `weight` set).
template void weight_only_gemm_tiles<formulas::mxfp8_torch>(const lp::weight_only::problem&, const lp::weight_only::tile*, std::int64_t,
                                                            const launch_options&);
template void weight_only_gemm_tiles<formulas::mxfp4_even>(const lp::weight_only::problem&, const lp::weight_only::tile*, std::int64_t,
                                                           const launch_options&);
template void weight_only_gemm_tiles<formulas::int8_per_channel>(const lp::weight_only::problem&, const lp::weight_only::tile*,
                                                                 std::int64_t, const launch_options&);
template void weight_only_gemm_tiles<formulas::nvfp4_weight>(const lp::weight_only::problem&, const lp::weight_only::tile*, std::int64_t,
                                                             const launch_options&);
template void weight_only_gemm<formulas::mxfp8_torch>(const lp::weight_only::problem&, const std::int64_t*, std::int64_t, const launch_options&);
template void weight_only_gemm<formulas::mxfp4_even>(const lp::weight_only::problem&, const std::int64_t*, std::int64_t, const launch_options&);
template void weight_only_gemm<formulas::int8_per_channel>(const lp::weight_only::problem&, const std::int64_t*, std::int64_t,
                                                           const launch_options&);
template void weight_only_gemm<formulas::nvfp4_weight>(const lp::weight_only::problem&, const std::int64_t*, std::int64_t, const launch_options&);

}  // namespace qpolicy::cuda
