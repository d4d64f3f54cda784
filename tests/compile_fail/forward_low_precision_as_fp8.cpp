// expect: linear_layer and moe_layer are the FP8 layers; a low-precision scheme's layers are lp_linear_layer
// Must not compile: an FP8 layer type of a low-precision scheme.
#include "qpolicy/kernels/cpu/forward.hpp"

namespace qp = qpolicy;
qp::cpu::linear_layer<qp::mxfp8> layer;
int main() {}
