#!/usr/bin/env bash
# Builds the fuzz targets with clang (-fsanitize=fuzzer,address,undefined) and runs each for SECONDS
# (default 60): the config target from the conformance configs, the safetensors header target from its
# seeds. Exits non-zero on a finding.
set -euo pipefail
seconds=${1:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${QPOLICY_FUZZ_DIR:-$(mktemp -d)}
cases=${QPOLICY_CONFIG_CASES:-$root/../shared/conformance/config_cases.json}
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found, skipped"; exit 0; }
mkdir -p "$work/corpus"
flags=(-std=c++20 -O1 -g -I"$root/include" -DBOOST_JSON_NO_LIB)
srcs=("$root"/src/match/pattern_set.cpp "$root"/src/json/*.cpp "$root"/src/plan/*.cpp "$root"/kernels/device_info_none.cpp)
st_srcs=("$root"/src/io/safetensors.cpp "$root"/src/json/json_text.cpp)
clang++ "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  "$root/tests/fuzz/config_fuzz.cpp" "${srcs[@]}" -lboost_json -lfmt -o "$work/config_fuzz"
clang++ "${flags[@]}" "$root/tests/fuzz/config_fuzz.cpp" "$root/tests/fuzz/replay_main.cpp" "${srcs[@]}" \
  -lboost_json -lfmt -o "$work/make_corpus"
QPOLICY_CONFIG_CASES="$cases" "$work/make_corpus" --write-corpus "$work/corpus"
"$work/config_fuzz" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 "$work/corpus" 2>&1 | tail -n 25
mkdir -p "$work/st_corpus"
clang++ "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  "$root/tests/fuzz/safetensors_fuzz.cpp" "${st_srcs[@]}" -lboost_json -o "$work/safetensors_fuzz"
clang++ "${flags[@]}" -DQPOLICY_REPLAY "$root/tests/fuzz/safetensors_fuzz.cpp" "${st_srcs[@]}" -lboost_json \
  -o "$work/safetensors_seeds"
"$work/safetensors_seeds" --write-corpus "$work/st_corpus"
"$work/safetensors_fuzz" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 "$work/st_corpus" 2>&1 | tail -n 25
