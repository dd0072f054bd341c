#!/usr/bin/env bash
# The main job: installs what is missing (scripts/install-deps.sh), builds (scripts/build.sh), runs
# openmla-bench (arguments go to it; default: the quick grid, BF16). Without a CUDA GPU,
# openmla-bench says so and runs the CPU reference on a small case instead.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
bash scripts/build.sh
echo "bench.sh: build/openmla-bench $*"
exec build/openmla-bench "$@"
