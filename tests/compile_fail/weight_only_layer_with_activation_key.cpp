// expect: a weight-only layer's activation is its scheme row's treatment for the layer kind
// Must not compile: a weight-only layer given an FP8 activation key instead of its row's treatment.
#include "qpolicy/kernels/cpu/forward.hpp"

namespace qp = qpolicy;
qp::cpu::moe_layer<qp::mxfp4, qp::mxfp4_dynamic> layer;
int main() {}
