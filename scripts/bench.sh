#!/usr/bin/env bash
# The main job: installs what is missing, builds, runs openmla-bench (arguments go to it; default:
# the quick grid, BF16). Without a CUDA GPU, openmla-bench says so and runs the CPU reference on a
# small case instead.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
bash scripts/build.sh
exec build/openmla-bench "$@"
