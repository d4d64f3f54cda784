#!/usr/bin/env bash
# Writes the first ```cpp block of README.md's "## Compile-time policies" section to OUT, so the
# README's example is compiled and run as a test and cannot drift from the code.
# usage: extract_readme_example.sh README.md OUT
set -euo pipefail
awk '
  /^## / { in_section = ($0 == "## Compile-time policies") }
  in_section && /^```cpp$/ && !done { in_code = 1; next }
  in_code && /^```$/ { in_code = 0; done = 1; next }
  in_code { print }
' "$1" > "$2"
if [ ! -s "$2" ]; then
  echo "README.md has no \`\`\`cpp block under \"## Compile-time policies\"" >&2
  exit 1
fi
