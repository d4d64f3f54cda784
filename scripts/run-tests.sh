#!/usr/bin/env bash
# Builds and runs every test suite (unit, conformance, compile-time, fuzz replay, gpu), then the
# libFuzzer target for QPOLICY_FUZZ_SECONDS (default 60) when clang is installed, then the benchmark.
# Ends with one line: "tests: N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh || { echo "tests: 0 passed, 1 failed"; exit 1; }
meson test -C build --print-errorlogs --num-processes 2 2>&1 | tee build/test-output.txt
count() { local n; n=$(grep -E "^$1:" build/test-output.txt | tail -1 | awk -F: '{gsub(/ /, "", $2); print $2}'); echo "${n:-0}"; }
passed=$(count Ok); failed=$(( $(count Fail) + $(count Timeout) + $(count 'Unexpected Pass') )); skipped=$(count Skipped)
[ -s build/test-output.txt ] && grep -q "^Ok:" build/test-output.txt || failed=$((failed + 1))
if command -v clang++ >/dev/null; then
  if bash tests/fuzz/run_libfuzzer.sh "${QPOLICY_FUZZ_SECONDS:-60}"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
else
  echo "fuzz: clang++ is not installed; the libFuzzer run is skipped (apt-get install clang to run it)"
  skipped=$((skipped + 1))
fi
meson test -C build --benchmark --verbose 2>&1 | grep '^bench:' || true
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
