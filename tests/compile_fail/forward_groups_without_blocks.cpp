// expect: 128x128 weight blocks pair with 1x128 activation groups (fp8_per_block_dynamic) and only with them
// Must not compile: 1x128 activation groups with per-channel weights, on the GPU's MoE layer type.
#include "qpolicy/kernels/cuda/forward.hpp"

namespace qp = qpolicy;
qp::cuda::device_moe<qp::fp8_per_channel, qp::fp8_per_block_dynamic> layer;
int main() {}
