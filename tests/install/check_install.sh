#!/usr/bin/env bash
# The installed tree as a consumer sees it: meson install into a staging directory, then
#   1. every public header (docs/api.md: all but detail/) compiles alone against the staged include
#      directory only, with -Werror -Wall -Wextra (no header reaches back into the source tree);
#   2. examples/consumer-cmake builds with find_package(qpolicy) (CMAKE_PREFIX_PATH = the staging
#      prefix), against the shared and the static library, and both programs run;
#      and so does the README's "Using qpolicy from C++" snippet (its cmake and cpp blocks);
#   3. examples/consumer-meson builds through pkg-config (PKG_CONFIG_PATH) and runs;
#   4. the staged CLI prints its version;
#   5. a meson project with qpolicy as a subproject (subprojects/qpolicy, CPU only to keep it short)
#      builds the same consumer through dependency('qpolicy') and runs it.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR. Exits 77 (skipped) without cmake or pkg-config.
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
for tool in cmake pkg-config; do
  command -v "$tool" >/dev/null || { echo "install: skipped: $tool is not installed (apt-get install $tool)"; exit 77; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/qpolicy-install-XXXXXX")
trap 'rm -rf "$work"' EXIT
option() { meson introspect "$build" --buildoptions | python3 -c "import json, sys; print(next(o['value'] for o in json.load(sys.stdin) if o['name'] == '$1'))"; }
prefix=$(option prefix) libdir=$(option libdir) includedir=$(option includedir)
DESTDIR="$work/stage" meson install -C "$build" --no-rebuild --quiet >/dev/null
stage="$work/stage$prefix"
[[ "$libdir" = /* ]] && lib="$work/stage$libdir" || lib="$stage/$libdir"
[[ "$includedir" = /* ]] && inc="$work/stage$includedir" || inc="$stage/$includedir"
echo "install: staged under $stage"

# 1. Each public header alone.
headers=$(cd "$inc" && find qpolicy -name '*.hpp' -not -path '*/detail/*' | sort)
count=0
for h in $headers; do
  printf '#include <%s>\n' "$h" > "$work/one.cpp"
  g++ -std=c++20 -fsyntax-only -Werror -Wall -Wextra -I"$inc" -isystem /usr/local/cuda/include "$work/one.cpp" 2> "$work/err.txt" || {
    echo "FAIL: public header $h does not compile alone against the installed tree:"; head -20 "$work/err.txt"; exit 1; }
  count=$((count + 1))
done
echo "ok: $count public headers compile alone against $inc with -Werror -Wall -Wextra"

# 2. CMake, find_package.
cmake -S "$src/examples/consumer-cmake" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$stage" -DCMAKE_BUILD_TYPE=Release > "$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; exit 1; }
grep 'qpolicy .* (CUDA kernels' "$work/cmake.log"
cmake --build "$work/cmake" -j 2 > "$work/cmake-build.log" 2>&1 || { tail -40 "$work/cmake-build.log"; exit 1; }
LD_LIBRARY_PATH="$lib" "$work/cmake/consumer"
"$work/cmake/consumer_static" > /dev/null
echo "ok: examples/consumer-cmake builds with find_package(qpolicy) and runs (shared and static)"
mkdir -p "$work/readme"
for lang in cmake cpp; do
  out=$([ "$lang" = cmake ] && echo CMakeLists.txt || echo app.cpp)
  awk -v lang="$lang" '
    /^## / { in_section = ($0 == "## Using qpolicy from C++") }
    in_section && $0 == "```" lang && !done { in_code = 1; next }
    in_code && /^```$/ { in_code = 0; done = 1; next }
    in_code { print }' "$src/README.md" > "$work/readme/$out"
  [ -s "$work/readme/$out" ] || { echo "FAIL: README.md has no \`\`\`$lang block under \"## Using qpolicy from C++\""; exit 1; }
done
cmake -S "$work/readme" -B "$work/readme/build" -DCMAKE_PREFIX_PATH="$stage" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" \
  > "$work/readme.log" 2>&1 && cmake --build "$work/readme/build" > "$work/readme.log" 2>&1 || { tail -40 "$work/readme.log"; exit 1; }
got=$(LD_LIBRARY_PATH="$lib" "$work/readme/build/app")
[ "$got" = "fp8_per_channel: y[0] = 5.125 (512 x bf16(0.01) = 5.125)" ] || { echo "FAIL: the README snippet printed: $got"; exit 1; }
echo "ok: the README's C++ snippet builds with its CMakeLists.txt and prints: $got"

# 3. meson, pkg-config.
PKG_CONFIG_PATH="$lib/pkgconfig" meson setup "$work/meson" "$src/examples/consumer-meson" > "$work/meson.log" 2>&1 ||
  { cat "$work/meson.log"; exit 1; }
ninja -C "$work/meson" > "$work/meson-build.log" 2>&1 || { tail -40 "$work/meson-build.log"; exit 1; }
LD_LIBRARY_PATH="$lib" "$work/meson/consumer" > /dev/null
echo "ok: examples/consumer-meson builds through pkg-config ($(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --modversion qpolicy)) and runs"

# 4. The CLI.
"$stage/bin/qpolicy" --version

# 5. As a meson subproject.
mkdir -p "$work/sub/subprojects"
ln -s "$src" "$work/sub/subprojects/qpolicy"
cp "$src/examples/consumer/consumer.cpp" "$work/sub/"
cat > "$work/sub/meson.build" <<'MESON'
project('qpolicy-subproject-consumer', 'cpp', default_options: ['cpp_std=c++20', 'warning_level=2', 'werror=true'])
qpolicy_dep = dependency('qpolicy', fallback: 'qpolicy', default_options: ['cuda=disabled', 'fuzz=disabled'])
executable('consumer', 'consumer.cpp', dependencies: qpolicy_dep)
MESON
meson setup --force-fallback-for=qpolicy "$work/sub/build" "$work/sub" > "$work/sub.log" 2>&1 || { cat "$work/sub.log"; exit 1; }
ninja -C "$work/sub/build" > "$work/sub-build.log" 2>&1 || { tail -40 "$work/sub-build.log"; exit 1; }
"$work/sub/build/consumer" > /dev/null
echo "ok: a meson project with subprojects/qpolicy builds the consumer through dependency('qpolicy') and runs it"
