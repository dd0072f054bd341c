#!/usr/bin/env bash
# Configures and builds OpenMLA into build/ (Release, Ninja, every core): the libraries, the tests,
# openmla-bench and the Python extension (into python/openmla/) when the project's virtual
# environment .venv/ (scripts/install-deps.sh) has nanobind.
# Extra arguments go to cmake, e.g. bash scripts/build.sh -DOPENMLA_PORTABLE_ARCHS=90a
# Env: OPENMLA_PYTHON: the interpreter the extension is built for (default .venv/bin/python).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

cmake_args=(-G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release)
python="${OPENMLA_PYTHON:-$root/.venv/bin/python}"
if [ -f python/CMakeLists.txt ]; then
  # Python_EXECUTABLE pins CMake's FindPython (and so nanobind) to this interpreter rather than the
  # first python3 on PATH.
  if "$python" -c "import nanobind" >/dev/null 2>&1; then
    echo "build: Python extension for $python"
    cmake_args+=(-DOPENMLA_BUILD_PYTHON=ON -DPython_EXECUTABLE="$python")
  else
    echo "build: no nanobind for $python: the Python extension is not built (bash scripts/install-deps.sh sets up .venv)"
    cmake_args+=(-DOPENMLA_BUILD_PYTHON=OFF)
  fi
fi
echo "build: configuring build/ (Release, Ninja)"
cmake "${cmake_args[@]}" "$@"
echo "build: compiling with $(nproc) jobs"
ninja -C build -j"$(nproc)"
echo "build: ok"
