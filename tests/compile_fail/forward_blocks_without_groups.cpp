// expect: 128x128 weight blocks pair with 1x128 activation groups (fp8_per_block_dynamic) and only with them
// Must not compile: 128x128 weight blocks with per-token activations.
#include "qpolicy/kernels/cpu/forward.hpp"

namespace qp = qpolicy;
qp::cpu::linear_layer<qp::fp8_per_block, qp::fp8_per_token> layer;
int main() {}
