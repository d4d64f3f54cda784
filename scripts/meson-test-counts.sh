# Sourced by run-tests.sh and run-sanitized.sh: the totals of a `meson test` log.
# meson_count LOG FIELD: the number on the log's last "FIELD:" line (Ok, Fail, Timeout, Skipped, ...), 0 if none.
meson_count() {
  local n
  n=$(grep -E "^$2:" "$1" | tail -1 | awk -F: '{gsub(/ /, "", $2); print $2}')
  echo "${n:-0}"
}
# meson_failures LOG: failed, timed-out and unexpectedly passing tests, plus 1 when the log has no totals
# (the build or meson itself failed).
meson_failures() {
  local n=$(( $(meson_count "$1" Fail) + $(meson_count "$1" Timeout) + $(meson_count "$1" 'Unexpected Pass') ))
  grep -q "^Ok:" "$1" || n=$((n + 1))
  echo "$n"
}
