#!/bin/bash
# Session 40 run 6: e7f10da, the wide kernel's partial rows fp32 again up to 32 query rows (run 5: the 16-row shapes
# at b = 1-16, which run the wide kernel, still 0.95-0.96x with fp16), fp16 from 33. Short for the device time left:
# A/B on those shapes and one 128-row control, the sm90 suite, memcheck and racecheck on two split tests.
set -u
P=/tmp/pre; mkdir -p $P/base $P/new/tests
xz -dc .carry/s39/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s40/bench_new.xz > $P/new/openmla-bench
xz -dc .carry/s40/gpu_tests_new.xz > $P/new/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/new/openmla-bench $P/new/tests/openmla_gpu_tests
BINS="base=$P/base new=$P/new" OUT=$OUT/ab ROUNDS=2 SHAPES="1,1,16,4096 1,1,16,32768 16,1,16,4096 1,1,128,32768" \
  bash scripts/ab_env.sh --backend sm90 | tee $OUT/table_bf16.md
OPENMLA_BACKEND=sm90 timeout 150 $P/new/tests/openmla_gpu_tests > $OUT/gpu_tests_sm90.log 2>&1
echo "gpu tests (sm90): rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/gpu_tests_sm90.log | tr '\n' ' ')" | tee $OUT/summary.txt
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=sm90 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $P/new/tests/openmla_gpu_tests \
    --gtest_filter='Decode.ScheduleIndependentOfPartCount:Decode.Sm90ScheduleForced' --gtest_brief=1 > $OUT/sanitizer_$tool.log 2>&1
  echo "compute-sanitizer $tool (sm90, ScheduleIndependentOfPartCount, Sm90ScheduleForced): rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$tool.log | tail -1)" | tee -a $OUT/summary.txt
done
cd $OUT && tar cJf logs.tar.xz ab gpu_tests_sm90.log sanitizer_*.log && rm -r ab gpu_tests_sm90.log sanitizer_*.log
