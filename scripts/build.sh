#!/usr/bin/env bash
# Configures (once) and builds into build/; CUDA is used when nvcc is found.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
if [ -f build/build.ninja ]; then :; else meson setup build >/dev/null; fi
ninja -C build >/dev/null
