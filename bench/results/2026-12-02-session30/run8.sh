#!/bin/bash
# Session 30 run 8 (577d5d8): where the 32-row narrow form loses with few tiles per CTA. Per-instruction stall
# samples at b=16, s_q=2, h_q=16, 1K (32 rows per CTA), and 16 query rows on a 32-row CTA against a 16-row one.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s30/bench_final.xz > $P/openmla-bench; chmod +x $P/openmla-bench
B=$P/openmla-bench
for r in 1 2; do for v in 16 32 64; do
  $B --backend sm90 --sm90-rows-per-cta $v --shape 16,1,16,1024 --shape 16,1,16,4096 --shape 128,1,16,1024 --check-samples 0 --json $OUT/rows16_${v}_$r.json > /dev/null 2>&1
done; done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT 64 16 32
mkdir -p $OUT/src
OUT=$OUT/src BENCH=$B BENCH_EXTRA="--sm90-rows-per-cta 32" TOP=40 bash scripts/ncu_source.sh "b=16,s_q=2,h_q=16,s_k=1024" > $OUT/src_top.txt 2>&1
tail -45 $OUT/src_top.txt
xz -9 $OUT/src/source.csv; rm -f $OUT/src/source.ncu-rep
cd $OUT && tar cf src.tar src && rm -r src
