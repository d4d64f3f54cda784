#!/usr/bin/env bash
# The tree built with AddressSanitizer + UndefinedBehaviorSanitizer (GCC, CPU only: nvcc takes no
# sanitizers) into build-sanitized/, then the suites that run the library's code: unit, conformance,
# numerics, cli, checkpoint, fuzz replay and hostile, with halt_on_error=1: any sanitizer report fails
# the run. Only what those suites run is built (no demo, benchmarks or GPU probes). The compile-time
# suite is left to the plain build: its plans are computed by the compiler, and what it runs of the
# library (the JSON front end) the unit and conformance suites run here too, while its programs are the
# slowest the sanitized tree would compile. Ends with one line, "sanitized: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --packages-only
if [ ! -f build-sanitized/build.ninja ]; then
  meson setup build-sanitized -Dcuda=disabled -Db_sanitize=address,undefined -Dbuildtype=debugoptimized >/dev/null ||
    { echo "sanitized: 0 passed, 1 failed"; exit 1; }
fi
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1
# The sanitizers look at memory, not at numbers: the property tests draw a third of their random rounds
# here (every kind of check still runs; the plain build's suites draw them all).
export QPOLICY_PROPERTY_ROUNDS=${QPOLICY_PROPERTY_ROUNDS:-8}
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
log=build-sanitized/sanitized-output.txt
# meson test builds the targets of the selected tests, and only those.
meson test -C build-sanitized --print-errorlogs --num-processes 2 --timeout-multiplier 4 --suite unit --suite conformance \
  --suite numerics --suite cli --suite checkpoint --suite fuzz --suite hostile \
  >"$log" 2>&1
grep -vE "^\[[0-9]+/[0-9]+\] " "$log"
source scripts/meson-test-counts.sh
passed=$(meson_count "$log" Ok) failed=$(meson_failures "$log")
reports=$(grep -cE "runtime error:|ERROR: AddressSanitizer|ERROR: LeakSanitizer" "$log" || true)
[ "$reports" -eq 0 ] || { echo "sanitized: $reports sanitizer reports in $log"; failed=$((failed + 1)); }
echo "sanitized: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
