#!/bin/bash
# Session 33 run 6: e7b467f (the shared TileMask, 359ccb1; the planner's 3% whole-request slack with 2+ m-tiles).
# 1) the GPU suite on every backend and the sanitizers on gpu_check.sh's subset; 2) base (bd48c69) against e7b467f
# on the shapes whose plan the rule changes and two it does not, each shape by both binaries back to back, two
# rounds; 3) issue #4's ratio shapes.
set -u
P=/tmp/pre; mkdir -p $P/base $P/final/tests
xz -dc .carry/s33/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s33/bench_final.xz > $P/final/openmla-bench
xz -dc .carry/s33/gpu_tests_final.xz > $P/final/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/final/openmla-bench $P/final/tests/openmla_gpu_tests
export OPENMLA_COMMIT=e7b467f
mkdir -p $OUT/check $OUT/ab
PREBUILT=$P/final BACKENDS="sm90 auto portable" SANITIZE=1 COMMIT=e7b467f bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -11 $OUT/check.txt
S="128,1,128,8192 128,2,128,4096 128,4,64,4096 128,2,128,8192 64,1,128,16384 64,2,64,16384 128,1,128,16384 128,2,128,1024"
for r in 1 2; do
  order="base final"; [ $r = 2 ] && order="final base"
  i=0
  for s in $S; do
    i=$((i + 1))
    for v in $order; do
      timeout 60 $P/$v/openmla-bench --backend sm90 --shape $s --check-samples $((2 - r)) --json $OUT/ab/s${i}_${v}_$r.json > /dev/null 2>&1 || echo "$s $v $r failed"
    done
  done
done
python3 bench/results/2026-12-02-session30/ab_table.py $OUT/ab base final | tee $OUT/table_rule.md
$P/final/openmla-bench --format bf16,fp8_e4m3,fp8_ds_mla --shape 128,1,16,16384 --check-samples 1 --json $OUT/ratio.json | tail -4
$P/final/openmla-bench --format bf16,fp8_e4m3 --shape 128,2,128,8192 --check-samples 1 --json $OUT/cb.json | tail -3
$P/final/openmla-bench --format fp8_e4m3 --fp8-math qk_and_pv --shape 128,2,128,8192 --check-samples 1 --json $OUT/cb_fp8math.json | tail -2
cd $OUT && tar cJf logs.tar.xz check ab && rm -r check ab
