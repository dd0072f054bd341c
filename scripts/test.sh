#!/usr/bin/env bash
# The whole test suite: installs what is missing (scripts/install-deps.sh), builds (scripts/build.sh),
# runs ctest (CPU tests; the GPU tests report as skipped where there is no GPU), then the Python tests
# in python/tests with the pytest of the project's virtual environment .venv/.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1

bash scripts/install-deps.sh || { echo "test.sh: installing dependencies failed" >&2; exit 1; }
bash scripts/build.sh || { echo "test.sh: build failed" >&2; exit 1; }

status=0
echo "test.sh: ctest"
ctest --test-dir build --output-on-failure -j"$(nproc)" || status=1

if [ -d python/tests ]; then
  echo "test.sh: pytest (.venv)"
  # Only the package under test on the path: the caller's PYTHONPATH is not the venv's.
  PYTHONPATH="$root/python" "$root/.venv/bin/python" -m pytest -q python/tests
  rc=$?
  if [ "$rc" -eq 5 ]; then
    echo "test.sh: pytest collected no tests in python/tests (exit code 5); nothing ran, so nothing failed"
  elif [ "$rc" -ne 0 ]; then
    status=1
  fi
fi

if [ "$status" -ne 0 ]; then echo "test.sh: FAILED" >&2; else echo "test.sh: passed"; fi
exit "$status"
