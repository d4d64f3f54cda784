// expect: scaled_linear_layer and scaled_moe_layer run the scaled FP8 GEMM; a weight-only scheme's layers are weight_only_linear_layer and weight_only_moe_layer
// Must not compile: a scaled FP8 layer type of a scheme whose row runs the weight-only GEMM.
#include "qpolicy/kernels/cpu/forward.hpp"

namespace qp = qpolicy;
qp::cpu::scaled_linear_layer<qp::mxfp8> layer;
int main() {}
