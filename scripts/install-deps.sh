#!/usr/bin/env bash
# Installs what building and testing OpenMLA need on a Debian machine, and only what is missing:
# cmake, ninja, g++ and GoogleTest from Debian's packages, the pinned Python packages of
# requirements-dev.txt from PyPI. The CUDA toolkit (nvcc) must already be there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

apt_packages=(cmake ninja-build libgtest-dev g++)
missing=()
for pkg in "${apt_packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]} (apt)"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: nvcc not found (neither on PATH nor in /usr/local/cuda/bin): install the CUDA toolkit" >&2
  exit 1
fi

# pip leaves requirements that are already met alone (no download).
python3 -m pip install --disable-pip-version-check --root-user-action=ignore -q \
  -r "$root/requirements-dev.txt"
echo "install-deps: ok"
