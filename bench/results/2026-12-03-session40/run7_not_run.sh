#!/bin/bash
# NOT RUN (session 40: device time spent). The binaries it names were built from 3855e1a +
# experiment_wide_fp16_all_rows.diff (-DOPENMLA_EXP_WIDE_FP16_ALL_ROWS) and from e7f10da (base), in the gitignored
# .carry/s40/ of this workspace.
# Run 7: the wide kernel's fp16 partial rows at every row count, with warps that hold no row of the tile skipping the
# block maxima and the stores (fp16all), against e7f10da (fp32 up to 32 rows: runs 4-5 measured fp16 there at
# 0.94-0.97x without the skip). If it is not slower at 16 rows, one form serves the wide kernel at every row count.
# Then the sm90 suite with it and memcheck / racecheck on the split tests.
set -u
P=/tmp/pre; mkdir -p $P/base $P/fp16all/tests
xz -dc .carry/s40/bench_new.xz > $P/base/openmla-bench; xz -dc .carry/s40/bench_fp16all.xz > $P/fp16all/openmla-bench
xz -dc .carry/s40/gpu_tests_fp16all.xz > $P/fp16all/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/fp16all/openmla-bench $P/fp16all/tests/openmla_gpu_tests
BINS="base=$P/base fp16all=$P/fp16all" OUT=$OUT/ab ROUNDS=3 \
  SHAPES="1,1,16,4096 1,1,16,32768 16,1,16,4096 1,1,32,32768 16,2,16,4096 1,1,128,32768" \
  bash scripts/ab_env.sh --backend sm90 | tee $OUT/table_bf16.md
OPENMLA_BACKEND=sm90 timeout 150 $P/fp16all/tests/openmla_gpu_tests > $OUT/gpu_tests_sm90.log 2>&1
echo "gpu tests (sm90): rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ')" | tee $OUT/summary.txt
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=sm90 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $P/fp16all/tests/openmla_gpu_tests \
    --gtest_filter='Decode.ScheduleIndependentOfPartCount:Decode.Sm90ScheduleForced:Decode.SplitRowsFarOutsideFp16Range' \
    --gtest_brief=1 > $OUT/sanitizer_$tool.log 2>&1
  echo "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$tool.log | tail -1)" | tee -a $OUT/summary.txt
done
cd $OUT && tar cJf logs.tar.xz ab gpu_tests_sm90.log sanitizer_*.log && rm -r ab gpu_tests_sm90.log sanitizer_*.log
