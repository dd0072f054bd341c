#!/usr/bin/env bash
# Configures and builds OpenMLA into build/ (Release, Ninja, every core): the libraries, the tests,
# openmla-bench and, when python/ and nanobind are there, the Python extension (into python/openmla/).
# Extra arguments go to cmake, e.g. bash scripts/build.sh -DOPENMLA_PORTABLE_ARCHS=90a
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

cmake_args=(-G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release)
if [ -f python/CMakeLists.txt ] && python3 -c "import nanobind" >/dev/null 2>&1; then
  cmake_args+=(-DOPENMLA_BUILD_PYTHON=ON)
fi
cmake "${cmake_args[@]}" "$@"
ninja -C build -j"$(nproc)"
