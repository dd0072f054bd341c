#!/usr/bin/env bash
# Installs what building and testing OpenMLA need on a Debian machine, and only what is missing:
#   - from Debian's packages (apt, through sudo when not root): cmake, ninja, g++, GoogleTest, and
#     python3 with its venv module and headers (the Python extension compiles against Python.h);
#   - the pinned Python packages of requirements-dev.txt, from PyPI, into the project's virtual
#     environment .venv/ (git-ignored), created here from Debian's python3.
# Nothing goes into the system's Python or the caller's environment: Debian's python3 is "externally
# managed" (PEP 668) and refuses pip installs, and a venv keeps the pinned versions to this checkout.
# The CUDA toolkit (nvcc) must already be there.
# Env: OPENMLA_BASE_PYTHON (default /usr/bin/python3): the interpreter the venv is created from.
# A second run installs nothing and only checks.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
base_python="${OPENMLA_BASE_PYTHON:-/usr/bin/python3}"
say() { echo "install-deps: $*"; }
die() { echo "install-deps: error: $*" >&2; exit 1; }

# ---- Debian packages ------------------------------------------------------------------------------
apt_packages=(cmake ninja-build g++ libgtest-dev python3 python3-venv python3-dev)
if command -v dpkg-query >/dev/null 2>&1; then
  missing=()
  for pkg in "${apt_packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    say "Debian packages: all present (${apt_packages[*]})"
  else
    sudo_cmd=()
    if [ "$(id -u)" -ne 0 ]; then
      command -v sudo >/dev/null 2>&1 ||
        die "missing Debian packages: ${missing[*]}; not root and no sudo: as root, run
  apt-get install ${missing[*]}"
      sudo_cmd=(sudo)
    fi
    say "installing Debian packages: ${missing[*]} (${sudo_cmd[*]:+sudo }apt-get)"
    # sudo resets the environment: DEBIAN_FRONTEND goes through env.
    "${sudo_cmd[@]}" apt-get update -qq
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
else
  say "no dpkg (not Debian): make sure these, or their equivalents, are installed: ${apt_packages[*]}"
fi

# ---- CUDA toolkit ---------------------------------------------------------------------------------
if command -v nvcc >/dev/null 2>&1; then
  nvcc_path="$(command -v nvcc)"
elif [ -x /usr/local/cuda/bin/nvcc ]; then
  nvcc_path=/usr/local/cuda/bin/nvcc
else
  die "nvcc not found (neither on PATH nor in /usr/local/cuda/bin): install the CUDA toolkit"
fi
say "CUDA toolkit: $nvcc_path ($("$nvcc_path" --version | grep -o 'release [0-9.]*' || echo 'version unknown'))"

# ---- project virtual environment ------------------------------------------------------------------
[ -x "$base_python" ] || die "$base_python not found (Debian package python3)"
base_version="$("$base_python" -c 'import platform; print(platform.python_version())')"
# A venv is reused only when it runs the base interpreter's version: after a Python upgrade its
# site-packages belong to the old version, so it is created anew.
venv_version="$("$venv/bin/python" -c 'import platform; print(platform.python_version())' 2>/dev/null || true)"
if [ "$venv_version" = "$base_version" ] && [ -f "$venv/pyvenv.cfg" ]; then
  say "virtual environment: .venv (Python $venv_version)"
else
  say "creating the virtual environment .venv from $base_python (Python $base_version)"
  "$base_python" -m venv --clear "$venv" ||
    die "creating .venv failed; on Debian it needs the package python3-venv"
fi
py="$venv/bin/python"
"$py" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("include"), "Python.h")))' ||
  die "no Python.h for $base_python: the Python extension needs the headers (Debian package python3-dev)"

# Installed only when a pinned version is missing or differs: the check reads the installed
# packages' metadata and needs no network.
need_pip="$("$py" - "$root/requirements-dev.txt" <<'EOF'
import re, sys
from importlib import metadata
wrong = []
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s;]+)", line)
    if not m:
        wrong.append(line)  # not a plain pin: let pip decide
        continue
    try:
        if metadata.version(m.group(1)) != m.group(2):
            wrong.append(line)
    except metadata.PackageNotFoundError:
        wrong.append(line)
print(" ".join(wrong))
EOF
)"
if [ -z "$need_pip" ]; then
  say "Python packages: all present in .venv (requirements-dev.txt)"
else
  say "installing into .venv: $need_pip (pip)"
  # PIP_USER / PIP_TARGET / PIP_PREFIX from the caller would send packages elsewhere.
  env -u PIP_USER -u PIP_TARGET -u PIP_PREFIX \
    "$py" -m pip install --disable-pip-version-check -q -r "$root/requirements-dev.txt"
fi
say "ok"
