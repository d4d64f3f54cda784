// expect: no CPU weight kernel for this scheme: only schemes whose contract row has a weight-scale layout have kernels
// Must not compile: the CPU weight kernel of a scheme without kernels.
#include "qpolicy/kernels/cpu/vectorized.hpp"

namespace qp = qpolicy;
int main() {
  std::uint8_t q[64];
  float s[2];
  qp::cpu::weight_kernel<qp::mxfp4>::run({}, q, s);
}
