#!/usr/bin/env bash
# Installs the Debian 12 packages qpolicy builds with, only those missing (quiet when all are there),
# then the tests' Python witnesses (below); --packages-only stops after the packages (the demo).
set -euo pipefail
case "${1:-}" in
  "" | --packages-only) ;;
  *) echo "install-deps.sh: unknown argument '$1'; expected nothing or --packages-only" >&2; exit 1 ;;
esac
packages=(g++ meson ninja-build pkg-config cmake python3-dev python3-venv libboost1.81-dev libboost-json1.81-dev libfmt-dev libhwy-dev catch2 time)
missing=()
missing_py=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "${1:-}" = --packages-only ] && exit 0

# The outside witnesses of the tests (never part of the product): Python's safetensors, ml_dtypes and
# the `regex` package vLLM matches with (pinned: the Unicode tables are generated from it) in a virtual environment, .venv-witness/. Skipped quietly once present; a failure here only means
# the witness tests report that they were skipped.
root=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$root/.venv-witness/bin/python3" ] || ! "$root/.venv-witness/bin/python3" -c "import safetensors, ml_dtypes, numpy, regex" 2>/dev/null; then
  for p in python3 python3-venv; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing_py+=("$p")
  done
  if [ ${#missing_py[@]} -gt 0 ] 2>/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
    { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        "${missing_py[@]}"; } >/dev/null || true
  fi
  if command -v python3 >/dev/null; then
    { python3 -m venv "$root/.venv-witness" && "$root/.venv-witness/bin/pip" install -q safetensors ml_dtypes numpy regex==2026.11.19; } \
      >/dev/null 2>&1 || echo "note: could not set up the Python test witnesses (.venv-witness); those checks will be skipped"
  fi
fi
