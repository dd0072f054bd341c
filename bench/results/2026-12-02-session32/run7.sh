#!/bin/bash
# Session 32 run 7 (bd48c69, the wide kernel without spills): the deepseek grid, default timing, FlashMLA's anchors
# joined (last, so that a time limit costs only the grid); issue #4's memory-bound FP8 ratios and its compute-bound shape (FP8 storage and FP8 math against bf16).
set -u
P=/tmp/pre; mkdir -p $P; xz -dc .carry/s32/bench_nospill.xz > $P/openmla-bench; chmod +x $P/openmla-bench
$P/openmla-bench --format bf16,fp8_e4m3,fp8_ds_mla --shape 128,1,16,16384 --check-samples 1 --json $OUT/ratio.json | tail -4
$P/openmla-bench --format bf16,fp8_e4m3 --shape 128,2,128,8192 --check-samples 1 --json $OUT/cb.json | tail -3
$P/openmla-bench --format fp8_e4m3 --fp8-math qk_and_pv --shape 128,2,128,8192 --check-samples 1 --json $OUT/cb_fp8math.json | tail -2
$P/openmla-bench --grid deepseek --anchors .carry/s32/h200-anchors.csv --json $OUT/deepseek_default.json > $OUT/deepseek_default.txt 2>&1
echo "grid rc=$?"
python3 scripts/grid_summary.py $OUT/deepseek_default.json | tee $OUT/summary_default.txt
