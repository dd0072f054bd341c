#!/bin/bash
# Session 30 run 7: the GPU suite and sanitizers on the final kernels (the ds_mla fold reverted), sm90 and the
# automatic backend; issue #4's memory-bound ratios against the bf16 kernel the automatic backend now runs there.
set -u
P=/tmp/pre; mkdir -p $P/tests
xz -dc .carry/s30/bench_final.xz > $P/openmla-bench; xz -dc .carry/s30/gpu_tests_final.xz > $P/tests/openmla_gpu_tests
chmod +x $P/openmla-bench $P/tests/openmla_gpu_tests
mkdir -p $OUT/check
PREBUILT=$P BACKENDS="sm90 auto" SANITIZE=1 COMMIT=577d5d8 bash scripts/gpu_check.sh none $OUT/check > $OUT/check.txt 2>&1
tail -10 $OUT/check.txt
for tool in memcheck racecheck synccheck; do
  OPENMLA_BACKEND=sm90 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $P/tests/openmla_gpu_tests --gtest_filter='Decode.Sm90Narrow16BitForced' --gtest_brief=1 > $OUT/check/san16_$tool.log 2>&1
  echo "16-bit narrow, $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/check/san16_$tool.log | tail -1)"
done
for r in 1 2; do
  $P/openmla-bench --format bf16,fp8_e4m3,fp8_ds_mla --shape 128,1,16,16384 --check-samples 1 --json $OUT/ratio_$r.json | tail -5
done
cd $OUT && tar cJf check.tar.xz check && rm -r check
