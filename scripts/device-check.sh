#!/usr/bin/env bash
# For a session lent a GPU: build with CUDA, run the gpu suite (quantization kernels, GEMMs and forward
# passes against the CPU ones) and the compile-time suite (the nvcc plan test), then the CUDA
# benchmarks; prints what docs/perf.md should record.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
[ -f build-gpu/build.ninja ] || meson setup build-gpu -Dcuda=enabled >/dev/null
ninja -C build-gpu >/dev/null
meson test -C build-gpu --suite gpu --suite compile-time --print-errorlogs
./build-gpu/tests/cuda_quant_bench
./build-gpu/tests/cuda_gemm_bench  # GEMM TFLOPS vs cuBLASLt bf16, MoE loop
