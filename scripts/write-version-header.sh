#!/usr/bin/env bash
# Writes OUT_DIR/qpolicy/version.hpp as meson does (version from meson.build), for the builds that run
# without meson: scripts/device-build.sh (WITH_CUDA 1) and tests/fuzz/run_libfuzzer.sh (WITH_CUDA 0).
# usage: write-version-header.sh OUT_DIR WITH_CUDA
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$1
with_cuda=$2
version=$(sed -n "s/^  version: '\(.*\)',\$/\1/p" "$root/meson.build" | head -n 1)
IFS=. read -r major minor patch <<<"$version"
mkdir -p "$out/qpolicy"
sed -e "s/@major@/$major/;s/@minor@/$minor/;s/@patch@/$patch/;s/@version@/$version/;s/@with_cuda@/$with_cuda/" \
  "$root/include/qpolicy/version.hpp.in" >"$out/qpolicy/version.hpp"
