#!/bin/bash
# Session 30 run 6 (HEAD: the automatic schedule takes the 16-bit narrow kernel, 33b9c72, and ds_mla's tile
# scales folded into S^T's fp32 scores at 16 rows): GPU suite under sm90 and the automatic backend, sanitizers
# (gpu_check.sh's subset, the 32-row FP8 narrow tests, and the 16-bit narrow test); the FP8 narrow kernels
# against 0984f37, cold and at the cap; the deepseek grid, default timing and --sustain-ms 300, FlashMLA's
# anchors joined.
set -u
P=/tmp/pre; mkdir -p $P/tests $P/base
xz -dc .carry/s30/bench_auto.xz > $P/openmla-bench; xz -dc .carry/s30/gpu_tests_auto.xz > $P/tests/openmla_gpu_tests
xz -dc .carry/s30/bench_base.xz > $P/base/openmla-bench; chmod +x $P/openmla-bench $P/tests/openmla_gpu_tests $P/base/openmla-bench
mkdir -p $OUT/check
PREBUILT=$P BACKENDS="sm90 auto" SANITIZE=1 COMMIT=$(git rev-parse --short HEAD) bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -12 $OUT/check.txt
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $P/tests/openmla_gpu_tests --gtest_filter='Decode.Sm90Narrow16BitForced' --gtest_brief=1 > $OUT/check/san16_$tool.log 2>&1
  echo "16-bit narrow, $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/check/san16_$tool.log | tail -1)"
done
mkdir -p $OUT/fp8
F="--shape 128,1,16,16384 --shape 64,1,16,4096 --shape 128,2,16,16384 --shape 16,1,16,4096"
OUT=$OUT/fp8 BINS="base=$P/base new=$P" ROUNDS=2 bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3,fp8_ds_mla $F --check-samples 0 > $OUT/fp8.md 2>&1
cat $OUT/fp8.md
mkdir -p $OUT/fp8c
OUT=$OUT/fp8c BINS="base=$P/base new=$P" ROUNDS=2 bash scripts/ab_env.sh --backend sm90 --format fp8_e4m3,fp8_ds_mla --shape 128,1,16,16384 --shape 64,1,16,4096 --sustain-ms 200 --check-samples 0 > $OUT/fp8_capped.md 2>&1
cat $OUT/fp8_capped.md
A="--anchors .carry/s30/h200-anchors.csv"
$P/openmla-bench --grid deepseek $A --json $OUT/deepseek_default.json > $OUT/deepseek_default.txt 2>&1
$P/openmla-bench --grid deepseek $A --sustain-ms 300 --json $OUT/deepseek_sustained.json > $OUT/deepseek_sustained.txt 2>&1
for n in default sustained; do echo "== $n"; python3 scripts/grid_summary.py $OUT/deepseek_$n.json | tee $OUT/summary_$n.txt; done
cd $OUT && tar cJf check.tar.xz check fp8 fp8c && rm -r check fp8 fp8c
