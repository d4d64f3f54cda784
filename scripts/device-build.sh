#!/usr/bin/env bash
# Builds the GPU tests and benchmarks with nvcc alone into build-device/ (no meson, Boost, fmt or
# Catch2: the lent GPU machine's image has none of them, and nothing can be installed there). The
# same sources and flags as meson's build of them: kernels for sm_90a and sm_90, the vectorized CPU kernels
# with -fno-trapping-math, no contraction anywhere, release (-O3 -DNDEBUG). Parallel, one job per file.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"
out=build-device
mkdir -p "$out/obj"
flags=(-std=c++20 -O3 -DNDEBUG -Iinclude -I. --expt-relaxed-constexpr -Xcompiler -pthread,-ffp-contract=off)
# Boost.Hana (the registry's type lists, header-only and self-contained) and Highway (the CPU kernels'
# portable SIMD: its headers and libhwy) where the image has none: copies staged on a machine that has
# them (`bash scripts/device-build.sh --stage` copies them to build-device/include and build-device/lib,
# which the device tool carries; the programs find libhwy there through their rpath).
if [ "${1:-}" = "--stage" ]; then
  mkdir -p "$out/include/boost" "$out/lib"
  cp -r /usr/include/boost/hana /usr/include/boost/hana.hpp "$out/include/boost/"
  cp -r /usr/include/hwy "$out/include/"
  cp -P /usr/lib/x86_64-linux-gnu/libhwy.so* "$out/lib/"
  echo "staged Boost.Hana and Highway in $out/include and $out/lib"
  exit 0
fi
# version.hpp, which meson writes: this build has the CUDA kernels.
bash scripts/write-version-header.sh "$out/include" 1
flags+=(-isystem "$out/include")  # version.hpp, and Boost.Hana where staged
arch=(-gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=sm_90)
compile() {  # source, extra flags...
  local src=$1
  shift
  nvcc "${flags[@]}" "$@" -c "$src" -o "$out/obj/$(echo "$src" | tr '/' '_').o"
}
pids=()
for src in kernels/cuda/device_info.cu kernels/cuda/device_memory.cu kernels/cuda/quant.cu kernels/cuda/block_quantizer.cu kernels/cuda/weight_only_gemm.cu kernels/cuda/weight_only_forward.cu kernels/cuda/gemm.cu kernels/cuda/forward.cu kernels/cuda/grouped_gemm.cu; do
  compile "$src" "${arch[@]}" & pids+=($!)
done
for src in kernels/cpu/reference.cpp kernels/cpu/quantize.cpp kernels/cpu/block_reference.cpp kernels/cpu/gemm_reference.cpp kernels/cpu/forward.cpp kernels/cpu/weight_only_forward.cpp kernels/cuda/gemm_check.cpp; do
  compile "$src" & pids+=($!)
done
# The CPU kernels (meson's libqpolicy_cpu_vectorized): every file of kernels/cpu but the ones above.
for src in kernels/cpu/*.cpp; do
  case "$src" in kernels/cpu/reference.cpp | kernels/cpu/quantize.cpp | kernels/cpu/block_reference.cpp | \
    kernels/cpu/gemm_reference.cpp | kernels/cpu/forward.cpp | kernels/cpu/weight_only_forward.cpp) continue ;; esac
  compile "$src" -DHWY_SHARED_DEFINE -Xcompiler -fno-trapping-math & pids+=($!)
done
programs=(tests/gpu/device_test.cpp tests/gpu/quant_gpu_test.cpp tests/gpu/block_quantizer_gpu_test.cpp tests/gpu/dequantize_gpu_test.cpp tests/gpu/weight_only_gpu_test.cpp tests/gpu/gemm_gpu_test.cpp tests/gpu/grouped_gpu_test.cpp
          tests/gpu/forward_gpu_test.cpp tests/bench/cuda_quant_bench.cpp tests/bench/cuda_gemm_bench.cpp
          tests/bench/cuda_weight_only_bench.cpp)
for src in "${programs[@]}"; do
  compile "$src" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
pids=()
objects=()
for o in "$out"/obj/kernels_*.o; do objects+=("$o"); done
for src in "${programs[@]}"; do
  name=$(basename "$src" .cpp)
  nvcc "${arch[@]}" -o "$out/$name" "$out/obj/$(echo "$src" | tr '/' '_').o" "${objects[@]}" -lcublasLt -L"$out/lib" -lhwy \
    -Xcompiler -pthread -Xlinker -rpath,'$ORIGIN/lib' &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "built: $(cd "$out" && ls -1 | grep -v -x -e obj -e include | tr '\n' ' ')"
