// expect: this scheme quantizes MoE experts only: its linear layers stay unquantized
// Must not compile: a linear layer of a scheme vLLM applies to MoE experts only.
#include "qpolicy/kernels/cpu/forward.hpp"

namespace qp = qpolicy;
qp::cpu::linear_layer<qp::nvfp4_per_token> layer;
int main() {}
