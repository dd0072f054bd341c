#!/bin/bash
# Session 27 run 6: DRAM bytes of one decode launch (Nsight Compute), base and the no-store timing build.
set -u
mkdir -p /tmp/ab/base /tmp/ab/nostore
for v in base nostore; do xz -dc .carry/s27/bench_$v.xz > /tmp/ab/$v/openmla-bench; chmod +x /tmp/ab/$v/openmla-bench; done
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,sm__cycles_active.avg,dram__throughput.avg.pct_of_peak_sustained_elapsed
for v in base nostore; do
  for s in 128,2,128,1024 128,2,128,16384; do
    timeout 120 ncu --clock-control none --kernel-name regex:wide_decode_kernel --launch-skip 5 --launch-count 1 --metrics $M \
      /tmp/ab/$v/openmla-bench --backend sm90 --format bf16 --shape $s --replays 5 --check-samples 0 > $OUT/ncu_${v}_$s.txt 2>&1
    echo "== $v $s"; grep -E "gpu__time|dram__|lts__|sm__cycles" $OUT/ncu_${v}_$s.txt
  done
done
