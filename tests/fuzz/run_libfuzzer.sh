#!/usr/bin/env bash
# Builds every libFuzzer target of tests/fuzz/ with clang (-fsanitize=fuzzer,address,undefined) and
# runs each from its seeds: for SECONDS each (default 20; CI), or with LONG for at least 10 M
# executions each (QPOLICY_FUZZ_RUNS to change that). Exits non-zero on any finding; a finding's input
# is kept in the work directory (QPOLICY_FUZZ_DIR, default a fresh temporary one).
set -euo pipefail
arg=${1:-20}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${QPOLICY_FUZZ_DIR:-$(mktemp -d)}
export QPOLICY_CONFIG_CASES=${QPOLICY_CONFIG_CASES:-$root/../shared/conformance/config_cases.json}
export QPOLICY_MODELS=${QPOLICY_MODELS:-$root/../shared/models}
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found, skipped"; exit 0; }
if [ "$arg" = LONG ]; then limit=(-runs="${QPOLICY_FUZZ_RUNS:-10000000}"); else limit=(-max_total_time="$arg"); fi
flags=(-std=c++20 -O1 -g -I"$root/include" -DBOOST_JSON_NO_LIB -fsanitize=address,undefined -fno-sanitize-recover=undefined)
# The runtime library, once, instrumented for coverage (the CPU kernels and the CUDA-less stubs).
lib_srcs=("$root"/src/match/*.cpp "$root"/src/json/*.cpp "$root"/src/plan/*.cpp "$root"/src/io/*.cpp
          "$root"/kernels/cpu/*.cpp "$root"/kernels/cuda/*_none.cpp "$root"/kernels/cuda/gemm_check.cpp
          "$root"/kernels/device_info_none.cpp "$root"/src/cli/args.cpp)
mkdir -p "$work/obj"
printf '%s\n' "${lib_srcs[@]}" | xargs -P "$(nproc)" -I{} sh -c \
  'clang++ "$@" -fsanitize=fuzzer-no-link -c "{}" -o "'"$work"'/obj/$(echo "{}" | tr / _).o"' _ "${flags[@]}"
libs=(-lboost_json -lfmt -lpthread)
status=0
run_target() {  # NAME SOURCES... : build, write the seeds, fuzz
  local name=$1; shift
  clang++ "${flags[@]}" -fsanitize=fuzzer "$@" "$work"/obj/*.o "${libs[@]}" -o "$work/$name"
  clang++ "${flags[@]}" "$@" "$root/tests/fuzz/seed_main.cpp" "$work"/obj/*.o "${libs[@]}" -o "$work/$name-seeds"
  mkdir -p "$work/$name-corpus"
  "$work/$name-seeds" --write-corpus "$work/$name-corpus" >/dev/null
  echo "fuzz: $name"
  if ! (cd "$work" && "./$name" "${limit[@]}" -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        "$name-corpus" 2>&1 | tail -n 12); then status=1; fi
  [ "${PIPESTATUS[0]:-0}" -eq 0 ] || status=1
}
# The two older targets keep their own seed writers.
clang++ "${flags[@]}" -fsanitize=fuzzer "$root/tests/fuzz/config_fuzz.cpp" "$work"/obj/*.o "${libs[@]}" -o "$work/config"
clang++ "${flags[@]}" "$root/tests/fuzz/config_fuzz.cpp" "$root/tests/fuzz/replay_main.cpp" "$work"/obj/*.o "${libs[@]}" -o "$work/config-seeds"
mkdir -p "$work/config-corpus" "$work/safetensors_header-corpus"
"$work/config-seeds" --write-corpus "$work/config-corpus" >/dev/null
echo "fuzz: config"
(cd "$work" && ./config "${limit[@]}" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 config-corpus 2>&1 | tail -n 12) || status=1
clang++ "${flags[@]}" -fsanitize=fuzzer "$root/tests/fuzz/safetensors_fuzz.cpp" "$work"/obj/*.o "${libs[@]}" -o "$work/safetensors_header"
clang++ "${flags[@]}" -DQPOLICY_REPLAY "$root/tests/fuzz/safetensors_fuzz.cpp" "$work"/obj/*.o "${libs[@]}" -o "$work/safetensors_header-seeds"
"$work/safetensors_header-seeds" --write-corpus "$work/safetensors_header-corpus" >/dev/null
echo "fuzz: safetensors_header"
(cd "$work" && ./safetensors_header "${limit[@]}" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  safetensors_header-corpus 2>&1 | tail -n 12) || status=1
for t in model_json cli_args safetensors_file index derive_model quantize; do
  run_target "$t" "$root/tests/fuzz/${t}_fuzz.cpp"
done
[ "$status" -eq 0 ] && echo "fuzz: no finding" || echo "fuzz: FINDINGS (inputs kept in $work)"
exit "$status"
