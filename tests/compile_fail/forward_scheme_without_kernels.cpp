// expect: this scheme has no forward pass in this build: its contract row has no weight-scale layout yet
// Must not compile: a forward layer of a scheme that plans but has no kernels yet.
#include "kernels/cpu/forward.hpp"

namespace qp = qpolicy;
qp::cpu::linear_layer<qp::mxfp8> layer;
int main() {}
