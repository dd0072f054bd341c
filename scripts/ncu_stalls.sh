#!/usr/bin/env bash
# Warp-stall breakdown of the decode kernel per backend (device batch).
# Usage: bash scripts/ncu_stalls.sh "<bench filter>" [backends: sm90 portable]. Needs build-gpu/openmla-bench
# (scripts/ncu_profile.sh builds it).
set -uo pipefail
out="${OUT:-ncu-out}"; mkdir -p "$out"
root="$(cd "$(dirname "$0")/.." && pwd)"; cd "$root"
f="$1"; shift
for s in "$@"; do
  ncu --clock-control none --kernel-name "regex:decode_kernel" --launch-skip 3 --launch-count 1 \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio,gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed" \
    build-gpu/openmla-bench --grid all --backend "$s" --filter "$f" --replays 5 --check-samples 0 --json /dev/null >"$out/stalls_$s.txt" 2>&1
  echo "=== $s $f"
  grep -E "gpu__time|pct|ratio" "$out/stalls_$s.txt" | awk '$NF+0 > 0.05 || /time|pct/ {print $1, $NF}' | sort -k2 -g -r | head -16
done
