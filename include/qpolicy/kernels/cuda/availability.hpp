#pragma once
// Whether this build has the CUDA backend, and the one refusal when it has not. A build without nvcc
// compiles kernels/cuda/without_cuda.cpp in place of the .cu files: every CUDA entry point there
// refuses with this sentence, and the calls that choose the GPU (quantize-tensor's and quantize's
// --device cuda, the Python package's CUDA tensors, the demo's --device cuda) refuse with it first,
// before any work. Plain header: no CUDA types.
#include <stdexcept>
#include <string>
#include <string_view>

#include "qpolicy/version.hpp"

namespace qpolicy::cuda {

/// A failed CUDA call: what was called, for which layer, and CUDA's message; or a build without CUDA.
class cuda_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Whether the library holds the CUDA kernels (nvcc was found at configure time).
inline constexpr bool built_with_cuda = QPOLICY_WITH_CUDA != 0;

/// The refusal of `what` ("quantize tensor 'a' on the GPU") in a build without CUDA.
inline std::string without_cuda_sentence(std::string_view what) {
  std::string out = "qpolicy was built without CUDA (nvcc was not found at configure time), so it cannot ";
  out.append(what);
  return out;
}

/// Throws cuda_error with without_cuda_sentence(what) in a build without CUDA; does nothing otherwise.
inline void require_cuda(std::string_view what) {
  if constexpr (!built_with_cuda) throw cuda_error(without_cuda_sentence(what));
}

}  // namespace qpolicy::cuda
