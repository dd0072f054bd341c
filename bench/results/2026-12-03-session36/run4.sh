#!/bin/bash
# Session 36 run 4: the copies FlashMLA issues differently. OPENMLA_EXP_FLAGS, one binary: l128 = the 16-bit KV map with
# CU_TENSOR_MAP_L2_PROMOTION_L2_128B (as cute sets it, FlashMLA) instead of 256B from 65 rows; lnone = no promotion;
# o = consumer 1 takes the late boxes of its next S in their copy order (4-7, 0-3, then 8, copied last by the
# half-0 thread; was 4-8, 0-3); ol = o and l128. Same-run A/B, round 1 checks against the CPU reference.
set -u
P=/tmp/pre; mkdir -p $P
xz -dc .carry/s36/bench.xz > $P/openmla-bench; chmod +x $P/openmla-bench
mkdir -p $OUT/ab
flags() { case $1 in l128) echo 512;; lnone) echo 1024;; o) echo 2048;; ol) echo 2560;; *) echo 0;; esac; }
S="128,1,128,16384 128,2,128,16384 64,2,64,4096 128,4,128,1024 16,4,128,32768 128,1,128,1024 128,1,64,1024 128,1,128,4096,varlen"
for r in 1 2; do
  i=0
  for s in $S; do
    i=$((i + 1))
    order="base l128 lnone o ol"; [ $r = 2 ] && order="ol o lnone l128 base"
    for v in $order; do
      OPENMLA_EXP_FLAGS=$(flags $v) timeout 120 $P/openmla-bench --backend sm90 --shape $s --check-samples $((2 - r)) \
        --json $OUT/ab/s${i}_${v}_$r.json > /dev/null 2>&1 || echo "$v $s $r failed"
    done
  done
done
python3 bench/results/2026-12-03-session36/fm_table.py $OUT/ab .carry/s36/h200-anchors.csv base l128 lnone o ol | tee $OUT/table_run4.md
cd $OUT && tar cJf ab_logs.tar.xz ab && rm -r ab
ls -la $OUT
