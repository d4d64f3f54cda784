#!/usr/bin/env bash
# The main job: qpolicy-demo (examples/demo.cpp). A Qwen3-30B-A3B-shaped model and a mixed FP8 policy,
# both fixed at build time, every layer bound to its scheme's kernels by the compiler; synthetic
# weights quantized online and a forward pass of every linear and MoE layer, with the error against
# float32 and the speed. Then the same through the JSON front end (examples/demo_policy.json), which
# shows that the runtime plan is identical. Extra arguments go to both runs (--tokens N, --threads N).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build/qpolicy-demo "$@"
echo
echo "--- the same policy as JSON, through the runtime front end and the runtime dispatch ---"
exec build/qpolicy-demo --config examples/demo_policy.json "$@"
