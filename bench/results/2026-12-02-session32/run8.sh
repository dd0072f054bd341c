#!/bin/bash
# Session 32 run 8: the grid's lowest ratios against session 31's grid (run 7: 64/4/16/1K 0.914x, 128/4/128/1K
# 0.920x, 64/1/64/1K 0.962x, 128/2/16/4K 0.957x) timed base (1585288) against nospill (bd48c69) in one run, three
# interleaved rounds, cold.
set -u
P=/tmp/pre; mkdir -p $P/base $P/nospill
xz -dc .carry/s32/bench_head.xz > $P/base/openmla-bench; xz -dc .carry/s32/bench_nospill.xz > $P/nospill/openmla-bench
chmod +x $P/base/openmla-bench $P/nospill/openmla-bench
S="--shape 64,4,16,1024 --shape 128,4,128,1024 --shape 64,1,64,1024 --shape 128,2,16,4096 --shape 128,1,64,4096,varlen"
mkdir -p $OUT/ab
for r in 1 2 3; do
  for v in base nospill; do
    timeout 100 $P/$v/openmla-bench --backend sm90 $S --check-samples 0 --json $OUT/ab/bf16_${v}_$r.json > /dev/null 2>&1 || echo "$v $r failed"
  done
done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab base nospill | tee $OUT/table.md
cd $OUT && tar cJf ab.tar.xz ab && rm -r ab
