#!/usr/bin/env bash
# The tests, in two tiers. Both end with one line: "N passed, N failed".
#
#   bash scripts/run-tests.sh          the fast tier, for a person: what the code does. Suites unit,
#                                      conformance, numerics, cli, checkpoint, compile-time, compile-fail,
#                                      hostile, demo, fuzz (the seed replays), regex (20,000 pairs against
#                                      the `regex` package) and gpu (skipped without a device). It builds
#                                      only what those suites run, in build/; no download over 100 MB, no
#                                      second build tree, no fuzzer or benchmark run.
#   bash scripts/run-tests.sh --full   everything (what CI runs): the fast tier's suites plus install,
#                                      python (the wheel, torch from PyPI) and witness-hf (where
#                                      .venv-hf is installed), then the libFuzzer run of every target
#                                      (clang), the ASan+UBSan build's suites (scripts/run-sanitized.sh),
#                                      the benchmarks, and the unit, numerics, cli and checkpoint suites
#                                      cross-built for arm64 under qemu (scripts/run-arm64.sh). Each
#                                      phase prints how long it took.
#
# Environment: QPOLICY_FUZZ_SECONDS (each libFuzzer target's run in --full, default 20).
set -uo pipefail
cd "$(dirname "$0")/.."

fast_suites=(unit conformance numerics cli checkpoint compile-time compile-fail hostile demo fuzz regex gpu)
full_suites=("${fast_suites[@]}" install python witness-hf)

tier=fast
case "${1:-}" in
  "") ;;
  --full) tier=full ;;
  -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "run-tests.sh: unknown argument '$1'; expected nothing (the fast tier) or --full" >&2; exit 1 ;;
esac
if [ "$tier" = fast ]; then
  echo "run-tests: the fast tier: building what its suites run and running them (about 4 minutes on 2 cores from a fresh clone, 2 once built)"
  suites=("${fast_suites[@]}")
else
  echo "run-tests: the full tier: every suite, the libFuzzer run, the sanitized build, the benchmarks and arm64 under qemu (about 60 to 80 minutes on 2 cores from a fresh clone)"
  suites=("${full_suites[@]}")
fi

passed=0 failed=0 skipped=0
source scripts/meson-test-counts.sh
# Adds a meson test log's totals to the counts.
count_meson_log() {
  passed=$((passed + $(meson_count "$1" Ok)))
  failed=$((failed + $(meson_failures "$1")))
  skipped=$((skipped + $(meson_count "$1" Skipped)))
}
# How long each phase took, for the tier's budget (CI: 90 minutes on 2 cores).
phase_started=$SECONDS
phase_done() {
  echo "run-tests: $1 took $((SECONDS - phase_started)) s"
  phase_started=$SECONDS
}
finish() {
  [ "$skipped" -eq 0 ] || echo "run-tests: $skipped skipped (their reasons: build/meson-logs/testlog.txt, and the lines above for fuzz)"
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
}

bash scripts/install-deps.sh || { failed=$((failed + 1)); finish; }
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
if [ ! -f build/build.ninja ]; then
  setup_log=$(mktemp)
  # Warnings are errors here: the install suite's subproject consumer builds the library with -Werror,
  # so a warning caught now is one the full tier would fail on much later.
  meson setup build -Dwerror=true >"$setup_log" 2>&1 || { cat "$setup_log"; failed=$((failed + 1)); }
  rm -f "$setup_log"
  [ "$failed" -eq 0 ] || finish
fi

# The suites; meson builds only the targets the selected tests need. The full tier builds the whole
# tree first, so that a target no test runs still has to compile.
suite_args=()
for s in "${suites[@]}"; do suite_args+=(--suite "$s"); done
log=build/test-output.txt
if [ "$tier" = full ] && ! ninja -C build >build/build-output.txt 2>&1; then
  grep -E "error|FAILED" build/build-output.txt | head -40
  failed=$((failed + 1))
fi
meson test -C build --print-errorlogs --num-processes 2 "${suite_args[@]}" 2>&1 | tee "$log" | grep -vE "^\[[0-9]+/[0-9]+\] |^ninja: (no work to do|Entering directory)"
count_meson_log "$log"
[ "$tier" = fast ] && finish
phase_done "the build and the suites"

# libFuzzer: every target for QPOLICY_FUZZ_SECONDS seconds (clang).
if command -v clang++ >/dev/null; then
  if bash tests/fuzz/run_libfuzzer.sh "${QPOLICY_FUZZ_SECONDS:-20}"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
else
  echo "fuzz: skipped: clang++ is not installed (apt-get install clang)"
  skipped=$((skipped + 1))
fi
phase_done "the libFuzzer run"

# The sanitized build and its suites (a tree of its own, build-sanitized/).
bash scripts/run-sanitized.sh >build/sanitized-output.txt 2>&1
sanitized_status=$?
grep -E '^sanitized:|FAIL|runtime error|AddressSanitizer' build/sanitized-output.txt
if [ "$sanitized_status" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
phase_done "the sanitized build and its suites"

# The benchmarks (built now; their results are figures, not verdicts: a benchmark that fails to run
# counts as a failure).
meson test -C build --benchmark --verbose >build/bench-output.txt 2>&1
bench_status=$?
grep '^bench:' build/bench-output.txt
if [ "$bench_status" -eq 0 ]; then passed=$((passed + 1)); else
  grep -E "FAIL|error" build/bench-output.txt | head -20
  failed=$((failed + 1))
fi
phase_done "the benchmarks"

# arm64: the cross build and its suites under qemu, as NEON and as SVE/SVE2 (a tree of its own, build-arm64/).
bash scripts/run-arm64.sh >build/arm64-output.txt 2>&1
arm64_status=$?
grep -E '^arm64:|FAIL|passed, .* failed$' build/arm64-output.txt | sed 's/^\([0-9]* passed\)/arm64: \1/'
if [ "$arm64_status" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
phase_done "arm64 under qemu"
finish
