#!/usr/bin/env bash
# Runs differential.py with the witness venv's Python; exit 77 (skipped) when the venv or its `regex`
# is missing (scripts/install-deps.sh sets it up).
set -u
py=${QPOLICY_PYTHON:-$(dirname "$0")/../../.venv-witness/bin/python3}
if [ ! -x "$py" ] || ! "$py" -c "import regex" 2>/dev/null; then
  echo "skipped: no witness venv with the regex package (run scripts/install-deps.sh)"
  exit 77
fi
if [ "${1:-}" = --idioms ]; then exec "$py" "$(dirname "$0")/check_idioms.py" "$2"; fi
exec "$py" "$(dirname "$0")/differential.py" "$@"
