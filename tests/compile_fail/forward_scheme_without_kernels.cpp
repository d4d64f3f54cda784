// expect: this scheme has no forward pass: it quantizes nothing
// Must not compile: a forward layer of a method that quantizes nothing.
#include "qpolicy/kernels/cpu/forward.hpp"

namespace qp = qpolicy;
qp::cpu::linear_layer<qp::unquantized> layer;
int main() {}
