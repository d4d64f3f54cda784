#!/usr/bin/env bash
# The python suite: builds the wheel from the source tree (pip wheel: meson-python and
# nanobind from PyPI in pip's isolated build environment; CPU kernels only, which keeps the build to
# about 3 minutes on two cores), checks that the source tree gained no build products, installs it in a
# fresh venv with numpy and ml_dtypes, runs tests/python/check_package.py against the CLI, and checks
# that pip uninstall leaves nothing. The torch checks run in .venv-hf when it exists
# (scripts/setup-witness-hf.sh); otherwise torch (PyPI's build, about 5 GB with its CUDA libraries) is
# installed into the fresh venv while the wheel builds, so the download adds little wall time.
# QPOLICY_PYTHON_TORCH=0 leaves torch out (its checks then say they were skipped).
# Usage: run.sh SOURCE_DIR QPOLICY_EXE. Skipped (77) without python3's venv module or PyPI.
set -euo pipefail
src=$(cd "$1" && pwd) exe=$2
case "${QPOLICY_PYTHON_TORCH:-1}" in
  0 | 1) ;;
  *) echo "python: QPOLICY_PYTHON_TORCH is '$QPOLICY_PYTHON_TORCH'; expected 0 (leave torch out) or 1 (the default)" >&2; exit 1 ;;
esac
work=$(mktemp -d "${TMPDIR:-/tmp}/qpolicy-python-XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv" 2>/dev/null || { echo "python: skipped: python3 -m venv fails (apt-get install python3-venv)"; exit 77; }
py="$work/venv/bin/python"
"$py" -m pip install -q --upgrade pip >/dev/null 2>&1 || { echo "python: skipped: PyPI is not reachable"; exit 77; }
torch_version=2.15.0
torch_pid=
if [ ! -x "$src/.venv-hf/bin/python" ] && [ "${QPOLICY_PYTHON_TORCH:-1}" != 0 ]; then
  torch_start=$(date +%s)
  "$py" -m pip install -q --no-cache-dir "torch==$torch_version" > "$work/torch.log" 2>&1 &
  torch_pid=$!
fi
before=$(cd "$src" && git status --porcelain --ignored 2>/dev/null | sort || true)
start=$(date +%s)
"$py" -m pip wheel -q --no-deps -w "$work/wheel" "$src" -Csetup-args=-Dcuda=disabled > "$work/wheel.log" 2>&1 ||
  { tail -40 "$work/wheel.log"; exit 1; }
echo "python: built $(basename "$work"/wheel/*.whl) in $(( $(date +%s) - start )) s"
after=$(cd "$src" && git status --porcelain --ignored 2>/dev/null | sort || true)
if [ "$before" != "$after" ]; then
  echo "FAIL: building the wheel changed the source tree:"; diff <(echo "$before") <(echo "$after") || true; exit 1
fi
echo "ok: building the wheel left the source tree as it was"
torch_python=
if [ -n "$torch_pid" ]; then
  if wait "$torch_pid"; then
    echo "python: installed torch $torch_version in $(( $(date +%s) - torch_start )) s, beside the wheel build"
    torch_python=$py
  else
    echo "python: the torch checks are skipped: pip install torch==$torch_version failed:"; tail -5 "$work/torch.log"
  fi
elif [ -x "$src/.venv-hf/bin/python" ]; then
  torch_python=$src/.venv-hf/bin/python
elif [ "${QPOLICY_PYTHON_TORCH:-1}" = 0 ]; then
  echo "python: the torch checks are skipped: QPOLICY_PYTHON_TORCH=0"
fi
"$py" -m pip install -q "$work"/wheel/*.whl numpy ml_dtypes > "$work/install.log" 2>&1 || { tail -20 "$work/install.log"; exit 1; }
(cd "$work" && QPOLICY_EXE="$exe" QPOLICY_SHARED="$src/../shared" "$py" "$src/tests/python/check_package.py")
if [ "$torch_python" = "$py" ]; then
  (cd "$work" && QPOLICY_EXE="$exe" QPOLICY_SHARED="$src/../shared" QPOLICY_TORCH_ONLY=1 "$py" "$src/tests/python/check_package.py")
elif [ -n "$torch_python" ]; then
  "$torch_python" -m pip install -q --force-reinstall --no-deps "$work"/wheel/*.whl > /dev/null
  (cd "$work" && QPOLICY_EXE="$exe" QPOLICY_SHARED="$src/../shared" QPOLICY_TORCH_ONLY=1 "$torch_python" "$src/tests/python/check_package.py")
  "$torch_python" -m pip uninstall -q -y qpolicy
fi
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
"$py" -m pip uninstall -q -y qpolicy
left=$(find "$site" -maxdepth 1 -iname 'qpolicy*')
[ -z "$left" ] || { echo "FAIL: pip uninstall left $left"; exit 1; }
echo "ok: pip uninstall removed the package ($site holds no qpolicy*)"
