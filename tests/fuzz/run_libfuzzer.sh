#!/usr/bin/env bash
# Builds every libFuzzer target of tests/fuzz/ with clang (-fsanitize=fuzzer,address,undefined) and
# runs each from its seeds, one target per CPU at a time: for SECONDS each (default 20; CI), or with
# LONG for 10 M executions each (QPOLICY_FUZZ_RUNS to change that; QPOLICY_FUZZ_TARGETS to run some of
# them). Exits non-zero on any finding; a finding's input is kept in the work directory
# (QPOLICY_FUZZ_DIR, default a fresh temporary one).
set -euo pipefail
arg=${1:-20}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${QPOLICY_FUZZ_DIR:-$(mktemp -d)}
export QPOLICY_CONFIG_CASES=${QPOLICY_CONFIG_CASES:-$root/../shared/conformance/config_cases.json}
export QPOLICY_MODELS=${QPOLICY_MODELS:-$root/../shared/models}
[ -f "$QPOLICY_CONFIG_CASES" ] || { echo "fuzz: $QPOLICY_CONFIG_CASES is missing (set QPOLICY_CONFIG_CASES)"; exit 1; }
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found, skipped"; exit 0; }
if [ "$arg" = LONG ]; then limit=(-runs="${QPOLICY_FUZZ_RUNS:-10000000}"); else limit=(-max_total_time="$arg"); fi
bash "$root/scripts/write-version-header.sh" "$work/include" 0  # a build without CUDA
flags=(-std=c++20 -O1 -g -ffp-contract=off -I"$root/include" -I"$work/include" -I"$root" -DBOOST_JSON_NO_LIB -fsanitize=address,undefined
       -fno-sanitize-recover=undefined)
# The runtime library, once, instrumented for coverage (the CPU kernels, and the CUDA backend as a build without CUDA has it).
lib_srcs=("$root"/src/match/*.cpp "$root"/src/json/*.cpp "$root"/src/plan/*.cpp "$root"/src/io/*.cpp "$root"/src/source/*.cpp
          "$root"/kernels/cpu/*.cpp "$root"/kernels/cuda/without_cuda.cpp "$root"/kernels/cuda/gemm_check.cpp "$root"/src/cli/args.cpp)
mkdir -p "$work/obj"
if [ ! -f "$work/obj/.built" ]; then  # a second run into the same directory reuses the objects
  printf '%s\n' "${lib_srcs[@]}" | xargs -P "$(nproc)" -I{} sh -c \
    'clang++ "$@" -fsanitize=fuzzer-no-link -c "{}" -o "'"$work"'/obj/$(echo "{}" | tr / _).o"' _ "${flags[@]}"
  touch "$work/obj/.built"
fi
libs=(-lboost_json -lfmt -lhwy -lpthread)
status=0
# The two older targets keep their own seed writers; the rest share seed_main.cpp.
seed_sources() {
  case $1 in
    config) echo "$root/tests/fuzz/config_fuzz.cpp $root/tests/fuzz/replay_main.cpp" ;;
    safetensors_header) echo "-DQPOLICY_REPLAY $root/tests/fuzz/safetensors_fuzz.cpp" ;;
    *) echo "$root/tests/fuzz/${1}_fuzz.cpp $root/tests/fuzz/seed_main.cpp" ;;
  esac
}
fuzz_source() { [ "$1" = safetensors_header ] && echo "$root/tests/fuzz/safetensors_fuzz.cpp" || echo "$root/tests/fuzz/${1}_fuzz.cpp"; }
# Builds target $1 and its seed writer, writes its seeds and fuzzes it; its output goes to $work/$1.log
# and its exit status to $work/$1.status.
fuzz_one() {
  local t=$1 rc=0
  {
    # shellcheck disable=SC2046
    clang++ "${flags[@]}" -fsanitize=fuzzer $(fuzz_source "$t") "$work"/obj/*.o "${libs[@]}" -o "$work/$t" &&
    # shellcheck disable=SC2046
    clang++ "${flags[@]}" $(seed_sources "$t") "$work"/obj/*.o "${libs[@]}" -o "$work/$t-seeds" &&
    mkdir -p "$work/$t-corpus" &&
    "$work/$t-seeds" --write-corpus "$work/$t-corpus" >/dev/null &&
    (cd "$work" && "./$t" "${limit[@]}" -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$t-corpus")
  } >"$work/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$work/$t.status"
}
# One target per CPU at a time (each fuzzer is one process); QPOLICY_FUZZ_TARGETS picks some.
targets=(${QPOLICY_FUZZ_TARGETS:-config safetensors_header model_json cli_args safetensors_file index derive_model quantize checkpoint_source checkpoint_dir})
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
done
wait
for t in "${targets[@]}"; do
  echo "fuzz: $t"
  tail -n 12 "$work/$t.log"
  [ "$(cat "$work/$t.status" 2>/dev/null)" = 0 ] || status=1
done
[ "$status" -eq 0 ] && echo "fuzz: no finding" || echo "fuzz: FINDINGS (inputs kept in $work)"
exit "$status"
