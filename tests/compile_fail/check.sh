#!/bin/bash
# Must-not-compile test: compiles SOURCE with the given compiler command and passes when compilation
# fails with the text of SOURCE's "// expect: " line in the diagnostics.
# usage: check.sh SOURCE COMPILER [ARGS...]
set -u
src=$1
shift
expect=$(sed -n 's|^// expect: ||p' "$src" | head -n 1)
if [ -z "$expect" ]; then
  echo "FAIL: $src has no '// expect: MESSAGE' line"
  exit 1
fi
out=$("$@" -fsyntax-only "$src" 2>&1)
rc=$?
if [ $rc -eq 0 ]; then
  echo "FAIL: $src compiled, but it must not; expected: $expect"
  exit 1
fi
# The compiler prints the message as a C string in a template argument: undo its escapes.
plain=$(printf '%s\n' "$out" | sed -e 's/\\\\/\x01/g' -e "s/\\\\'/'/g" -e 's/\\"/"/g' -e 's/\x01/\\/g')
if grep -qF -- "$expect" <<<"$plain"; then
  echo "ok: $(basename "$src") is rejected with: $expect"
  exit 0
fi
echo "FAIL: $(basename "$src") is rejected, but without the expected message"
echo "expected: $expect"
echo "--- compiler output (first 40 lines) ---"
printf '%s\n' "$out" | head -n 40
exit 1
