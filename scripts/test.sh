#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs ctest (CPU tests; the GPU tests report
# as skipped where there is no GPU), then the Python tests when python/tests exists.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash scripts/install-deps.sh || { echo "test.sh: installing dependencies failed" >&2; exit 1; }
bash scripts/build.sh || { echo "test.sh: build failed" >&2; exit 1; }

status=0
ctest --test-dir build --output-on-failure -j"$(nproc)" || status=1

if [ -d python/tests ]; then
  export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
  python3 -m pytest -q python/tests
  rc=$?
  if [ "$rc" -eq 5 ]; then
    echo "test.sh: pytest collected no tests in python/tests (exit code 5); nothing ran, so nothing failed"
  elif [ "$rc" -ne 0 ]; then
    status=1
  fi
fi

if [ "$status" -ne 0 ]; then echo "test.sh: FAILED" >&2; fi
exit "$status"
