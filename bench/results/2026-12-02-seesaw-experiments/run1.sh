#!/bin/bash
# Session 27 run 1: FP8 seesaw (half-by-half expansion) — tests (sm90 forced, FP8 subset) and same-run A/B.
set -u
mkdir -p /tmp/ab/base /tmp/ab/new
xz -dc .carry/s27/bench_base.xz > /tmp/ab/base/openmla-bench
xz -dc .carry/s27/bench_new.xz > /tmp/ab/new/openmla-bench
xz -dc .carry/s27/gpu_tests.xz > /tmp/T
chmod +x /tmp/ab/base/openmla-bench /tmp/ab/new/openmla-bench /tmp/T
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
F='*Fp8*:*DsMla*:*NonFinite*:*ScoresJump*:*Bf16QueryBeyond*:*Seesaw*:*ManyHeads*:*ScheduleIndependent*:*Sm90Schedule*'
OPENMLA_BACKEND=sm90 timeout 280 /tmp/T --gtest_filter="$F" > $OUT/tests_sm90.log 2>&1
echo "tests rc $?"; grep -E "^\[  (FAILED|PASSED)  \]|FAILED" $OUT/tests_sm90.log | head -20
OUT=$OUT/ab BINS="base=/tmp/ab/base new=/tmp/ab/new" ROUNDS=2 AB_TIMEOUT=200 bash scripts/ab_env.sh --backend sm90 \
  --format fp8_e4m3,fp8_ds_mla --shape 128,2,128,8192 --shape 128,2,128,16384 --shape 64,2,64,4096 --shape 128,4,128,1024 \
  --check-samples 1 > $OUT/ab_table.txt 2>&1
/tmp/ab/base/openmla-bench --backend sm90 --format bf16 --shape 128,2,128,8192 --shape 128,2,128,16384 --check-samples 1 > $OUT/bf16.txt 2>&1
grep -E "^\[" $OUT/bf16.txt
cat $OUT/ab_table.txt
