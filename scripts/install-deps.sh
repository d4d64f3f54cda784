#!/usr/bin/env bash
# Installs the Debian 12 packages qpolicy builds with, only those missing (quiet when all are there).
set -euo pipefail
packages=(g++ meson ninja-build pkg-config libboost1.81-dev libboost-json1.81-dev libfmt-dev catch2 time)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
