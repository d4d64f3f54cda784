// expect: this quant key has no kernel in this build
// Must not compile: running the CPU kernel of a key whose scheme has no kernels yet.
#include "qpolicy/kernels/cpu/vectorized.hpp"

namespace qp = qpolicy;
int main() {
  std::uint8_t q[64];
  float s[2];
  qp::cpu::run_key_kernel<qp::mxfp8_static>({}, {}, q, s);
}
