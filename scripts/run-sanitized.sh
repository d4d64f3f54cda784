#!/usr/bin/env bash
# The whole tree built with AddressSanitizer + UndefinedBehaviorSanitizer (GCC, CPU only: nvcc takes no
# sanitizers) into build-sanitized/, then the unit, conformance, numerics, compile-time, fuzz-replay and
# hostile suites with halt_on_error=1: any sanitizer report fails the run. Ends with one line,
# "sanitized: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ ! -f build-sanitized/build.ninja ]; then
  meson setup build-sanitized -Dcuda=disabled -Db_sanitize=address,undefined -Dbuildtype=debugoptimized >/dev/null ||
    { echo "sanitized: 0 passed, 1 failed"; exit 1; }
fi
ninja -C build-sanitized >/dev/null || { echo "sanitized: 0 passed, 1 failed"; exit 1; }
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
log=build-sanitized/sanitized-output.txt
meson test -C build-sanitized --print-errorlogs --num-processes 2 --timeout-multiplier 4 --suite unit --suite conformance \
  --suite numerics --suite compile-time --suite fuzz --suite hostile 2>&1 | tee "$log"
count() { local n; n=$(grep -E "^$1:" "$log" | tail -1 | awk -F: '{gsub(/ /, "", $2); print $2}'); echo "${n:-0}"; }
passed=$(count Ok); failed=$(( $(count Fail) + $(count Timeout) ))
reports=$(grep -cE "runtime error:|ERROR: AddressSanitizer|ERROR: LeakSanitizer" "$log" || true)
[ "$reports" -eq 0 ] || { echo "sanitized: $reports sanitizer reports in $log"; failed=$((failed + 1)); }
echo "sanitized: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
