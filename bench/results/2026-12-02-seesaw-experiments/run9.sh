#!/bin/bash
# Session 27 run 9: per-instruction stall samples (SourceCounters) of one wide_decode_kernel launch at b=128, s_q=2,
# h_q=128, 1K, base (5dd4cef) and the no-store timing build, to find what the output stores make wait.
set -u
mkdir -p /tmp/ab/base /tmp/ab/nostore
for v in base nostore; do xz -dc .carry/s27/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
for v in base nostore; do
  timeout 200 ncu --clock-control none --kernel-name regex:wide_decode_kernel --launch-skip 5 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --import-source no -f -o /tmp/src_$v \
    /tmp/ab/$v/openmla-bench --backend sm90 --format bf16 --shape 128,2,128,1024 --replays 5 --check-samples 0 > $OUT/ncu_run_$v.txt 2>&1
  echo "$v rc $?"; tail -2 $OUT/ncu_run_$v.txt
  ncu -i /tmp/src_$v.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz -6 > $OUT/source_$v.csv.xz
  ls -la $OUT/source_$v.csv.xz
done
