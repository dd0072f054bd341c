#!/bin/bash
# Session 30 run 4: Nsight Compute on the 16-bit narrow kernel where it loses most (b=16, 1K): 32 rows
# (s_q=2, h_q=16) on the narrow (32 rows per CTA) and wide kernels, 16 rows on the narrow kernel.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s30/bench_nopromo.xz > $P/openmla-bench; chmod +x $P/openmla-bench
B=$P/openmla-bench
i=0
for cfg in "2,16 32" "2,16 64" "1,16 16"; do
  set -- $cfg; i=$((i+1))
  ncu --clock-control none --kernel-name "regex:decode_kernel" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis \
    $B --backend sm90 --sm90-rows-per-cta $2 --shape 16,$1,1024 --replays 5 --check-samples 0 --json /dev/null > $OUT/ncu_$i.txt 2>&1
  echo "=== s_q,h_q=$1 rows/cta=$2"; grep -E "narrow|wide_decode|Duration|SM Frequency|Compute \(SM\) Throughput|DRAM Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per|Grid Size|Block Size|Stall" $OUT/ncu_$i.txt | head -24
done
