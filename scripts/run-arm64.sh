#!/usr/bin/env bash
# Cross-builds qpolicy for arm64 (Debian's g++-aarch64-linux-gnu and the arm64 packages, no CUDA) into
# build-arm64/ and runs the unit, numerics, cli and checkpoint suites under qemu-aarch64-static twice:
# as a NEON machine (QEMU_CPU=cortex-a72) and as one with SVE and SVE2 (QEMU_CPU=max). Installs what it
# needs, like the other scripts. Ends with one line, "N passed, N failed".
#
# The programs run dynamically linked against Debian's arm64 multiarch libraries (libc6:arm64 and the
# rest, which the :arm64 -dev packages install), with qemu's library prefix at / (`-L /`): with the
# cross toolchain's own sysroot (/usr/aarch64-linux-gnu) as the prefix, a program hangs as soon as it
# starts a second thread.
#
# Environment: QPOLICY_ARM64_ROUNDS (the property tests' random rounds under emulation, default 8: the
# same kinds of check on fewer random shapes; emulated code runs about 20 times slower).
set -uo pipefail
cd "$(dirname "$0")/.."
out=build-arm64

packages=(g++-aarch64-linux-gnu qemu-user-static libfmt-dev:arm64 libboost-json1.81-dev:arm64 libhwy-dev:arm64)
missing=()
dpkg --print-foreign-architectures | grep -qx arm64 || missing=(arch)
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
bash scripts/install-deps.sh --packages-only || { echo "arm64: the host's packages could not be installed"; echo "0 passed, 1 failed"; exit 1; }
if [ ${#missing[@]} -gt 0 ]; then
  echo "arm64: installing the cross toolchain, qemu and the arm64 libraries"
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  { $sudo dpkg --add-architecture arm64 && $sudo apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}"; } >/dev/null ||
    { echo "arm64: could not install ${packages[*]}"; echo "0 passed, 1 failed"; exit 1; }
fi

mkdir -p "$out"
cat >"$out/cross.ini" <<'EOF'
[binaries]
c = 'aarch64-linux-gnu-gcc'
cpp = 'aarch64-linux-gnu-g++'
ar = 'aarch64-linux-gnu-ar'
strip = 'aarch64-linux-gnu-strip'
pkgconfig = 'pkg-config'
exe_wrapper = ['qemu-aarch64-static', '-L', '/']

[properties]
pkg_config_libdir = ['/usr/lib/aarch64-linux-gnu/pkgconfig', '/usr/share/pkgconfig']

[host_machine]
system = 'linux'
cpu_family = 'aarch64'
cpu = 'aarch64'
endian = 'little'
EOF
if [ ! -f "$out/build.ninja" ]; then
  meson setup "$out" --cross-file "$out/cross.ini" -Dcuda=disabled -Dwerror=true >"$out/setup.txt" 2>&1 ||
    { tail -20 "$out/setup.txt"; echo "0 passed, 1 failed"; exit 1; }
fi
suites=(unit numerics cli checkpoint)
suite_args=()
for s in "${suites[@]}"; do suite_args+=(--suite "$s"); done

passed=0 failed=0 skipped=0
source scripts/meson-test-counts.sh
export QPOLICY_PROPERTY_ROUNDS=${QPOLICY_ARM64_ROUNDS:-8}
# The second CPU runs only what differs: the NEON and scalar targets' runs would repeat the first's.
for cpu in cortex-a72 max; do
  log="$out/test-$cpu.txt"
  echo "arm64: the ${suites[*]} suites under qemu, QEMU_CPU=$cpu"
  repeated=()
  [ "$cpu" = max ] && repeated=(--no-suite target-scalar --no-suite target-neon)
  QEMU_CPU=$cpu meson test -C "$out" --print-errorlogs --num-processes "$(nproc)" --timeout-multiplier 4 "${suite_args[@]}" \
    "${repeated[@]}" >"$log" 2>&1
  grep -E "^ *[0-9]+/[0-9]+ " "$log" | sed "s/^/  /"
  passed=$((passed + $(meson_count "$log" Ok)))
  failed=$((failed + $(meson_failures "$log")))
  skipped=$((skipped + $(meson_count "$log" Skipped)))
  grep -q "^Ok:" "$log" || tail -30 "$log"
done
[ "$skipped" -eq 0 ] || echo "arm64: $skipped skipped (their reasons: $out/meson-logs/testlog.txt)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
