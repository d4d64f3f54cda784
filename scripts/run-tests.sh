#!/usr/bin/env bash
# Builds and runs every test suite (unit, conformance, compile-time, compile-fail, numerics, fuzz
# replay, hostile, gpu), then every libFuzzer target for QPOLICY_FUZZ_SECONDS each (default 20) when
# clang is installed, then the sanitized build's suites (scripts/run-sanitized.sh), then the benchmarks.
# Ends with one line: "tests: N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh || { echo "tests: 0 passed, 1 failed"; exit 1; }
meson test -C build --print-errorlogs --num-processes 2 --no-suite regex-long --no-suite witness-hf 2>&1 | tee build/test-output.txt
count() { local n; n=$(grep -E "^$1:" build/test-output.txt | tail -1 | awk -F: '{gsub(/ /, "", $2); print $2}'); echo "${n:-0}"; }
passed=$(count Ok); failed=$(( $(count Fail) + $(count Timeout) + $(count 'Unexpected Pass') )); skipped=$(count Skipped)
[ -s build/test-output.txt ] && grep -q "^Ok:" build/test-output.txt || failed=$((failed + 1))
if command -v clang++ >/dev/null; then
  if bash tests/fuzz/run_libfuzzer.sh "${QPOLICY_FUZZ_SECONDS:-20}"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
else
  echo "fuzz: clang++ is not installed; the libFuzzer run is skipped (apt-get install clang to run it)"
  skipped=$((skipped + 1))
fi
# The sanitized build (ASan+UBSan, about 13 minutes on two cores); QPOLICY_SANITIZED=0 skips it.
if [ "${QPOLICY_SANITIZED:-1}" != 0 ]; then
  bash scripts/run-sanitized.sh > build/sanitized-output.txt 2>&1
  if [ $? -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  grep -E '^sanitized:|FAIL|runtime error|AddressSanitizer' build/sanitized-output.txt
else
  skipped=$((skipped + 1))
fi
meson test -C build --benchmark --verbose 2>&1 | grep '^bench:' || true
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
