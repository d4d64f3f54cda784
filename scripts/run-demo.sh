#!/usr/bin/env bash
# The main job: qpolicy-demo (examples/demo.cpp). A Qwen3-30B-A3B-shaped model and a policy that uses
# all seven online shorthands, both fixed at build time, every layer bound to its scheme's kernels by
# the compiler; synthetic weights quantized online and a forward pass of every linear and MoE layer,
# with the error against float32 and the speed. Then the same through the JSON front end
# (examples/demo_policy.json), which shows that the runtime plan is identical. Extra arguments go to
# both runs (--tokens N, --threads N, --device auto|cpu|cuda). Builds only the library and the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; then what="the library with its CUDA kernels (nvcc) and qpolicy-demo"
else what="the library (CPU kernels only: nvcc is not installed) and qpolicy-demo"; fi
if [ -x build/qpolicy-demo ]; then echo "run-demo: bringing $what in build/ up to date (seconds unless sources changed)"
else echo "run-demo: building $what into build/ (about a minute on 2 cores the first time; no test programs)"; fi
bash scripts/install-deps.sh --packages-only
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [ ! -f build/build.ninja ]; then meson setup build >"$log" 2>&1 || { cat "$log"; exit 1; }; fi
ninja -C build qpolicy-demo >"$log" 2>&1 || { grep -vE "^\[[0-9]+/[0-9]+\] " "$log" | head -60; exit 1; }
build/qpolicy-demo "$@"
echo
echo "--- the same policy as JSON, through the runtime front end and the runtime dispatch ---"
build/qpolicy-demo --config examples/demo_policy.json "$@"
