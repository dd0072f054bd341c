#!/bin/bash
# Session 28 run 7: the deepseek grid (bf16, automatic backend) and the FP8 grid at 7475d3e (desc_advance landed).
set -u
mkdir -p /tmp/ab/desc; xz -dc .carry/s28/bench_desc.xz > /tmp/ab/desc/openmla-bench; chmod +x /tmp/ab/desc/openmla-bench
timeout 330 /tmp/ab/desc/openmla-bench --grid deepseek --json $OUT/bench_deepseek_auto.json > $OUT/bench_deepseek_auto.txt 2>&1
echo "deepseek rc $?"
python3 scripts/grid_summary.py $OUT/bench_deepseek_auto.json > $OUT/deepseek_summary.txt 2>&1
timeout 200 /tmp/ab/desc/openmla-bench --grid fp8 --format bf16,fp8_e4m3,fp8_ds_mla --backend sm90 --json $OUT/bench_fp8.json > $OUT/bench_fp8.txt 2>&1
echo "fp8 rc $?"
timeout 60 /tmp/ab/desc/openmla-bench --grid fp8 --format fp8_e4m3 --fp8-math qk_and_pv --json $OUT/bench_fp8_math.json > $OUT/bench_fp8_math.txt 2>&1
echo "fp8 math rc $?"
cat $OUT/deepseek_summary.txt; tail -30 $OUT/bench_fp8.txt; tail -8 $OUT/bench_fp8_math.txt
