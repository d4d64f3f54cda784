// expect: the activation of a forward pass must be a dynamic activation key with a quantizer
// Must not compile: a static (weight) key where the activation quantizer goes.
#include "qpolicy/kernels/cpu/forward.hpp"

namespace qp = qpolicy;
qp::cpu::linear_layer<qp::fp8_per_tensor, qp::fp8_per_tensor_static> layer;
int main() {}
