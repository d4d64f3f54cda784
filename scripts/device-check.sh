#!/usr/bin/env bash
# For a session lent a GPU (the device tool, `bash scripts/device-check.sh`): builds the GPU tests and
# benchmarks with nvcc alone (scripts/device-build.sh: the machine's image has no Boost, fmt or
# Catch2, so meson cannot configure there), runs every GPU test (each CUDA kernel and forward pass
# against the CPU backend, the grouped MoE GEMM against spec §10's bound) and the CUDA benchmarks,
# and prints what docs/perf.md should record. Logs (four files) go to $OUT when the device tool sets
# it, else to build-device/logs. Exits 1 when a test fails. The kernels' type lists need Boost.Hana's
# headers and Highway: run `bash scripts/device-build.sh --stage` here first and carry build-device/include and build-device/lib.
set -uo pipefail
cd "$(dirname "$0")/.."
logs="${OUT:-build-device/logs}"
mkdir -p "$logs"
date -u +"%Y-%m-%d %H:%M UTC" | tee "$logs/device.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$logs/device.txt"
start=$SECONDS
if ! bash scripts/device-build.sh >"$logs/build.txt" 2>&1; then
  tail -40 "$logs/build.txt"
  exit 1
fi
echo "build: $((SECONDS - start)) s"
failed=0
: >"$logs/tests.txt"
# The low-precision vectors: ../shared's when the checkout has it, else a copy carried as
# build-device/low_precision_cases.json (cp ../shared/conformance/low_precision_cases.json build-device/).
if [ -z "${QPOLICY_LOW_PRECISION_CASES:-}" ]; then
  if [ -f ../shared/conformance/low_precision_cases.json ]; then
    export QPOLICY_LOW_PRECISION_CASES=../shared/conformance/low_precision_cases.json
  else
    export QPOLICY_LOW_PRECISION_CASES=build-device/low_precision_cases.json
  fi
fi
# vLLM 0.34's schemes' vectors the same way (build-device/new_schemes_cases.json when carried).
if [ -z "${QPOLICY_NEW_SCHEMES_CASES:-}" ]; then
  if [ -f ../shared/conformance/new_schemes_cases.json ]; then
    export QPOLICY_NEW_SCHEMES_CASES=../shared/conformance/new_schemes_cases.json
  else
    export QPOLICY_NEW_SCHEMES_CASES=build-device/new_schemes_cases.json
  fi
fi
for t in device_test quant_gpu_test block_quantizer_gpu_test dequantize_gpu_test weight_only_gpu_test gemm_gpu_test grouped_gpu_test forward_gpu_test; do
  echo "=== $t" >>"$logs/tests.txt"
  timeout 300 "build-device/$t" >>"$logs/tests.txt" 2>&1
  rc=$?
  case $rc in
    0) echo "test $t: passed" ;;
    77) echo "test $t: skipped: $(grep SKIP "$logs/tests.txt" | tail -1)" ;;
    *) echo "test $t: FAILED (exit $rc)"; failed=1 ;;
  esac
done
grep -E "FAIL|from the CPU|bound|cuBLASLt|fallback" "$logs/tests.txt" | head -60
for b in cuda_quant_bench cuda_gemm_bench cuda_weight_only_bench; do
  timeout 420 "build-device/$b" 2>&1 | tee -a "$logs/bench.txt"
done
exit $failed
