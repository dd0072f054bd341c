#!/bin/bash
# Session 31 run 9 (dfee6ee; libopenmla.a's SASS identical to 5784a0d's, which run 5 tested): the deepseek grid,
# default timing, FlashMLA's anchors joined, and issue #4's memory-bound FP8 ratios.
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s31/bench_grid.xz > $P/openmla-bench; chmod +x $P/openmla-bench
$P/openmla-bench --grid deepseek --anchors .carry/s31/h200-anchors.csv --json $OUT/deepseek_default.json > $OUT/deepseek_default.txt 2>&1
echo "grid rc=$?"
python3 scripts/grid_summary.py $OUT/deepseek_default.json | tee $OUT/summary_default.txt
$P/openmla-bench --format bf16,fp8_e4m3,fp8_ds_mla --shape 128,1,16,16384 --check-samples 1 --json $OUT/ratio.json | tail -4
