#!/bin/bash
# Session 27 run 14: per-instruction stall samples of faea8e0's seesaw kernel at b=128, s_q=2, h_q=128, 1K and 16K.
set -u
mkdir -p /tmp/ab/qrow
xz -dc .carry/s27/bench_qrow.xz > /tmp/ab/qrow/openmla-bench; chmod +x /tmp/ab/qrow/openmla-bench
for s in 128,2,128,1024 128,2,128,16384; do
  n=${s//,/_}
  timeout 200 ncu --clock-control none --kernel-name regex:wide_decode_kernel --launch-skip 5 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --import-source no -f -o /tmp/src_$n \
    /tmp/ab/qrow/openmla-bench --backend sm90 --format bf16 --shape $s --replays 5 --check-samples 0 > $OUT/ncu_run_$n.txt 2>&1
  echo "$s rc $?"
  ncu -i /tmp/src_$n.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz -6 > $OUT/source_qrow_$n.csv.xz
done
