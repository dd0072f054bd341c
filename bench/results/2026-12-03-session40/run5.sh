#!/bin/bash
# Session 40 run 5: 8580b7b, the partial rows' format chosen per kernel (fp16 for the wide, narrow FP8 and portable
# kernels; fp32 again for the 16-bit narrow and FP8-math kernels, where run 4 measured fp16 at 0.94-0.98x), set by
# each launcher in p.fp16_partials and read by the combine. Binaries built on the CPU machine and carried: new =
# 8580b7b; base = 3c8931a's kernels. Same-run A/B on the shapes run 4 moved, then the GPU suite with sm90 and
# portable forced, memcheck / racecheck / synccheck on the split tests (sm90), memcheck and racecheck on one (portable).
set -u
P=/tmp/pre; mkdir -p $P/base $P/new/tests
xz -dc .carry/s39/bench_base.xz > $P/base/openmla-bench; xz -dc .carry/s40/bench_new.xz > $P/new/openmla-bench
xz -dc .carry/s40/gpu_tests_new.xz > $P/new/tests/openmla_gpu_tests
chmod +x $P/base/openmla-bench $P/new/openmla-bench $P/new/tests/openmla_gpu_tests
ab() { BINS="base=$P/base new=$P/new" OUT=$OUT/ab_$1 ROUNDS=$2 SHAPES="$3" bash scripts/ab_env.sh "${@:4}" | tee $OUT/table_$1.md; }
ab bf16 2 "1,1,128,32768 1,1,16,4096 1,1,16,32768 16,1,16,4096 64,1,16,4096 16,1,128,4096 128,1,128,4096,varlen" --backend sm90
ab fp8 2 "1,1,16,32768" --backend sm90 --format fp8_e4m3
ab fp8math 2 "1,1,128,32768 128,2,128,8192" --backend sm90 --format fp8_e4m3 --fp8-math qk_and_pv
ab portable 2 "1,1,16,32768" --backend portable --format fp8_e4m3
F='Decode.ScheduleIndependentOfPartCount:Decode.Fp8MathIndependentOfPartCount:Decode.Sm90SchedulesOnPaddedPages'
PREBUILT=$P/new BACKENDS="sm90 portable" SANITIZE=1 SANITIZE_FILTER="$F" TEST_TIMEOUT=300 SANITIZE_TIMEOUT=90 \
  COMMIT=8580b7b bash scripts/gpu_check.sh none $OUT/check 2>&1 | tail -10
for tool in memcheck racecheck; do
  OPENMLA_BACKEND=portable timeout 80 compute-sanitizer --tool $tool --error-exitcode 9 $P/new/tests/openmla_gpu_tests \
    --gtest_filter=Decode.ScheduleIndependentOfPartCount --gtest_brief=1 > $OUT/check/sanitizer_${tool}_portable.log 2>&1
  echo "compute-sanitizer $tool (portable, ScheduleIndependentOfPartCount): rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/check/sanitizer_${tool}_portable.log | tail -1)" | tee -a $OUT/check/summary.txt
done
cd $OUT && tar cJf logs.tar.xz ab_* check && rm -r ab_* && mv check/summary.txt summary.txt && rm -r check
cat $OUT/summary.txt $OUT/table_*.md
