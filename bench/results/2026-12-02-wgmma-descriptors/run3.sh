#!/bin/bash
# Session 28 run 3: per-instruction stall samples of base (6abbaed) and desc (b939aa6) at b=128, s_q=1, h_q=128, 16K
# (where desc is 1.4% slower) and b=128, s_q=2, h_q=128, 1K (where it is 2.3% faster).
set -u
for v in base desc; do mkdir -p /tmp/ab/$v; xz -dc .carry/s28/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
for v in base desc; do
  for s in 128,1,128,16384 128,2,128,1024; do
    n=${v}_${s//,/_}
    timeout 200 ncu --clock-control none --kernel-name regex:wide_decode_kernel --launch-skip 5 --launch-count 1 \
      --section WarpStateStats --section SourceCounters --section SpeedOfLight --import-source no -f -o /tmp/src_$n \
      /tmp/ab/$v/openmla-bench --backend sm90 --format bf16 --shape $s --replays 5 --check-samples 0 > $OUT/ncu_run_$n.txt 2>&1
    echo "$n rc $?"
    ncu -i /tmp/src_$n.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz -6 > $OUT/source_$n.csv.xz
    ncu -i /tmp/src_$n.ncu-rep --page details --csv 2>/dev/null > $OUT/details_$n.csv
  done
done
ls -la $OUT
