#!/usr/bin/env bash
# Nsight Compute profile of the decode kernel on chosen benchmark shapes (device batch).
# Usage: bash scripts/ncu_profile.sh "<filter>" ["<filter>" ...]; env BACKEND (default sm90),
# KERNEL (regex, default decode_kernel), SECTIONS (default: the ones below). Reports go to $OUT.
set -uo pipefail
out="${OUT:-ncu-out}"; mkdir -p "$out"
root="$(cd "$(dirname "$0")/.." && pwd)"; cd "$root"
gtest_args=(); [ -d .carry/googletest ] && gtest_args=(-DOPENMLA_GTEST_SOURCE_DIR="$root/.carry/googletest")
cmake -G Ninja -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DOPENMLA_PORTABLE_ARCHS=90a -DOPENMLA_BUILD_TESTS=OFF \
  "${gtest_args[@]}" >"$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
ninja -C build-gpu openmla-bench >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head; exit 1; }
i=0
for f in "$@"; do
  i=$((i + 1))
  ncu --clock-control none --kernel-name "regex:${KERNEL:-decode_kernel}" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy ${NCU_EXTRA:-} \
    build-gpu/openmla-bench --grid all --backend "${BACKEND:-sm90}" --filter "$f" --replays 5 --check-samples 0 \
    --json /dev/null >"$out/ncu_$i.txt" 2>&1
  echo "=== $f"; grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Shared Memory|Issue Slots Busy|No Eligible|Stall|Warp Cycles Per Issued|Tensor|L1/TEX Hit|Bank" "$out/ncu_$i.txt" | head -40
done
