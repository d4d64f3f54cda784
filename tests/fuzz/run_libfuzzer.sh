#!/usr/bin/env bash
# Builds the config fuzz target with clang (-fsanitize=fuzzer,address,undefined) and runs it for
# SECONDS (default 60) from a seed corpus made of the conformance configs. Exits non-zero on a finding.
set -euo pipefail
seconds=${1:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${QPOLICY_FUZZ_DIR:-$(mktemp -d)}
cases=${QPOLICY_CONFIG_CASES:-$root/../shared/conformance/config_cases.json}
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found, skipped"; exit 0; }
mkdir -p "$work/corpus"
flags=(-std=c++20 -O1 -g -I"$root/include" -DBOOST_JSON_NO_LIB)
srcs=("$root"/src/match/pattern_set.cpp "$root"/src/json/*.cpp "$root"/src/plan/*.cpp "$root"/kernels/device_info_none.cpp)
clang++ "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  "$root/tests/fuzz/config_fuzz.cpp" "${srcs[@]}" -lboost_json -lfmt -o "$work/config_fuzz"
clang++ "${flags[@]}" "$root/tests/fuzz/config_fuzz.cpp" "$root/tests/fuzz/replay_main.cpp" "${srcs[@]}" \
  -lboost_json -lfmt -o "$work/make_corpus"
QPOLICY_CONFIG_CASES="$cases" "$work/make_corpus" --write-corpus "$work/corpus"
"$work/config_fuzz" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 "$work/corpus" 2>&1 | tail -n 25
